"""Real data shipped with graphopt (package data, so an installed package finds it too).

- ``pipedream/``: 14 PipeDream layer profiles of real PyTorch models (MIT licence,
  ``pipedream/LICENSE.txt``; origin and format in ``pipedream/SOURCE.md``), read by
  ``pipedream:NAME`` (:mod:`graphopt.importers.pipedream`).
- ``tarnawski/``: the operator graphs of Tarnawski et al. (NeurIPS 2020; MIT licence,
  ``tarnawski/LICENSE.txt``; origin and format in ``tarnawski/SOURCE.md``), read by
  ``tarnawski:NAME`` (:mod:`graphopt.importers.tarnawski`).
- ``models/``: the move-gain model graphopt trains itself (``graphopt optimize --moves builtin``;
  how it was made: ``models/SOURCE.md``).
- ``tpugraphs/``: one TpuGraphs layout graph (CC BY 4.0; ``tpugraphs/SOURCE.md``), the real data
  of the learned cost model (:func:`graphopt.costmodel.tpugraphs.load_tpugraphs`).
"""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
PIPEDREAM_DIR = DATA_DIR / "pipedream"
"""The PipeDream profiles, ``<model>.txt`` each (``$GRAPHOPT_PIPEDREAM_DIR`` overrides it)."""
TARNAWSKI_DIR = DATA_DIR / "tarnawski"
"""Tarnawski et al.'s operator graphs, ``<model>_inference.json[.gz]`` each."""
TPUGRAPHS_SAMPLE = DATA_DIR / "tpugraphs" / "layout_xla_alexnet.npz"
"""The TpuGraphs layout sample: XLA alexnet, 47,712 measured configurations."""
MOVE_GAIN_MODEL = DATA_DIR / "models" / "move-gain.pt"
"""The built-in move-gain model (:mod:`graphopt.nn.move_gain`), ``--moves builtin``."""
