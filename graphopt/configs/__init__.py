"""Versioned default configurations (YAML) for ``graphopt train``."""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent
