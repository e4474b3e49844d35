"""Real data shipped with graphopt (package data, so an installed package finds it too).

- ``pipedream/``: 14 PipeDream layer profiles of real PyTorch models (MIT licence,
  ``pipedream/LICENSE.txt``; origin and format in ``pipedream/SOURCE.md``), read by
  ``pipedream:NAME`` (:mod:`graphopt.importers.pipedream`).
- ``tpugraphs/``: one TpuGraphs layout graph (CC BY 4.0; ``tpugraphs/SOURCE.md``), the real data
  of the learned cost model (:func:`graphopt.costmodel.tpugraphs.load_tpugraphs`).
"""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
PIPEDREAM_DIR = DATA_DIR / "pipedream"
"""The PipeDream profiles, ``<model>.txt`` each (``$GRAPHOPT_PIPEDREAM_DIR`` overrides it)."""
TPUGRAPHS_SAMPLE = DATA_DIR / "tpugraphs" / "layout_xla_alexnet.npz"
"""The TpuGraphs layout sample: XLA alexnet, 47,712 measured configurations."""
