"""Policy networks (GO-style) and their Stable-Baselines3 adapters."""
