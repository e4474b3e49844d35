"""PPO training runs of graphopt policies (config, run directories, callbacks, rollouts)."""
