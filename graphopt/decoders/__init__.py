"""Decoders: the network's per-op outputs steer a heuristic that builds the decision one op at a
time (placement: :mod:`~graphopt.decoders.placement`; priorities:
:mod:`~graphopt.decoders.scheduling`; fusion: :mod:`~graphopt.decoders.fusion`; all three:
:mod:`~graphopt.decoders.joint`). With all inputs zero each reproduces the heuristic it generalises.
"""
