"""The smallest PPO run configuration the training and evaluation tests share."""

from __future__ import annotations

from graphopt.train.config import TrainConfig

TINY: dict[str, object] = {
    "task": "placement",
    "graphs": "txl-tiny",
    "val_graphs": "txl-tiny",
    "cluster": "v100-nvlink-2",
    "total_timesteps": 32,
    "n_envs": 1,
    "n_steps": 16,
    "batch_size": 16,
    "n_epochs": 1,
    "eval_every": 16,
    "checkpoint_every": 16,
    "name": "tiny",
    "policy_kwargs": {
        "hidden": 16,
        "sage_layers": 1,
        "attn_layers": 1,
        "heads": 2,
        "segment_len": 32,
        "mem_len": 32,
    },
}
"""A run of two PPO updates on txl-tiny with a network of 16 hidden units."""


def tiny_config(**overrides: object) -> TrainConfig:
    """:data:`TINY` with ``overrides``, validated."""
    return TrainConfig(**{**TINY, **overrides}).validate()  # type: ignore[arg-type]
