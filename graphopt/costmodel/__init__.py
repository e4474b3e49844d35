"""Learned cost model: a GNN that ranks configurations of a graph by runtime.

Modules, one concept each: :mod:`~graphopt.costmodel.features` (graphopt op and decision
features), :mod:`~graphopt.costmodel.data` (datasets: simulator samples, TpuGraphs files),
:mod:`~graphopt.costmodel.tpugraphs` (the TpuGraphs ``.npz`` format), :mod:`~graphopt.costmodel.model`
(the network), :mod:`~graphopt.costmodel.losses`, :mod:`~graphopt.costmodel.metrics`,
:mod:`~graphopt.costmodel.fit` (whole-graph training, checkpoints),
:mod:`~graphopt.costmodel.gst` (Graph Segment Training for large graphs),
:mod:`~graphopt.costmodel.gbdt` (gradient-boosted-trees baseline) and
:mod:`~graphopt.costmodel.learned` (a trained model as a :class:`graphopt.typing.CostModel`).
"""
