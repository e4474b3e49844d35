"""Built-in workloads: GO's six model families as TensorFlow-style training graphs, random DAGs,
and named suites.

The families of GO's experiments (Zhou et al. 2020, "Transferable Graph Optimizers for ML
Compilers") are built op by op from real layer shapes (each module's docstring cites them),
forward and backward, with one update op per weight:

================================  ======================================================
:func:`rnnlm`                     LSTM language model, 2/4/8 layers
:func:`gnmt`                      GNMT encoder-decoder with attention, 2/4/8 layers
:func:`transformer_xl`            Transformer-XL, 2/4/8 layers
:func:`inception_v3`              Inception-v3
:func:`amoebanet`                 AmoebaNet-A
:func:`wavenet`                   WaveNet, 2 and 4 stacks
:func:`layered_dag`,              seeded random DAGs
:func:`series_parallel_dag`
================================  ======================================================

Most code only needs the registry: :func:`list_graphs`, :func:`get_graph` (cached),
:func:`resolve_graphs` (names, ``suite:<name>``, graph files) and :data:`SUITES`. To build new
workloads, use :class:`GraphBuilder` with the helpers of :mod:`~graphopt.workloads.ops`,
:mod:`~graphopt.workloads.layers`, :mod:`~graphopt.workloads.recurrent` and
:mod:`~graphopt.workloads.attention`; the backward pass is derived by
:mod:`~graphopt.workloads.backward` from the per-op rules of :mod:`~graphopt.workloads.gradients`.
"""

from graphopt.workloads.amoebanet import amoebanet
from graphopt.workloads.builder import GraphBuilder, Tensor
from graphopt.workloads.gnmt import gnmt
from graphopt.workloads.inception import inception_v3
from graphopt.workloads.random_dags import layered_dag, series_parallel_dag
from graphopt.workloads.registry import (
    SUITES,
    family_of,
    get_graph,
    list_graphs,
    list_suites,
    resolve_graphs,
)
from graphopt.workloads.rnnlm import rnnlm
from graphopt.workloads.transformer_xl import transformer_xl
from graphopt.workloads.wavenet import wavenet

__all__ = [
    "SUITES",
    "GraphBuilder",
    "Tensor",
    "amoebanet",
    "family_of",
    "get_graph",
    "gnmt",
    "inception_v3",
    "layered_dag",
    "list_graphs",
    "list_suites",
    "resolve_graphs",
    "rnnlm",
    "series_parallel_dag",
    "transformer_xl",
    "wavenet",
]
