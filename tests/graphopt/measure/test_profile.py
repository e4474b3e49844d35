"""Profiling a model's graph on this CPU: matching, stored times, the simulator's use of them.

Tiny zoo sizes, one thread, few iterations; no wall-clock asserts (the machine is shared)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch

from graphopt.graph import CompGraph
from graphopt.hardware import Device
from graphopt.measure import profile as profiler
from graphopt.measure.machine import cpu_kind, machine_cluster
from graphopt.measure.profile import ProfileReport, profile_graph
from graphopt.sim import simulate

RESNET = "torch:resnet?depth=18&width=8&image=32&batch=2&classes=10"
TRANSFORMER = "torch:transformer?layers=1&d_model=32&heads=2&ff=64&vocab=64&seq=8&batch=2"


@functools.cache
def imported(spec: str) -> CompGraph:
    """The graph of ``spec`` imported without profiling, once per test run (graphs are
    immutable)."""
    from graphopt.importers.zoo import build_zoo

    return build_zoo(spec)


def measured_share(graph: CompGraph, kind: str) -> float:
    times = graph.measured[kind]
    return float(np.mean(np.isfinite(times) & (times > 0)))


def device_of(kind: str) -> Device:
    return Device("cpu0", kind, 5e10, 2e10, 8e9, 2e-6)


@pytest.mark.parametrize("timer", ["profiler", "clock"])
def test_forward_graph_is_the_imported_graph_with_times(timer: str) -> None:
    graph, report = profile_graph(RESNET, iterations=3, warmup=1, timer=timer)
    reference = imported(RESNET)
    assert graph.op_names == reference.op_names and graph.op_types == reference.op_types
    np.testing.assert_array_equal(graph.flops, reference.flops)
    np.testing.assert_array_equal(graph.bytes_accessed, reference.bytes_accessed)
    np.testing.assert_array_equal(graph.edge_src, reference.edge_src)
    assert graph.name == reference.name
    kind = cpu_kind(1)
    assert report.kind == kind and list(graph.measured) == [kind]
    assert report.match_rate >= 0.95 and report.matched == graph.num_ops - len(report.unmatched_ops)
    assert measured_share(graph, kind) >= 0.95
    unmatched = {graph.op_names[i] for i in np.flatnonzero(np.isnan(graph.measured[kind]))}
    assert unmatched == set(report.unmatched_ops)
    assert report.op_seconds == pytest.approx(float(np.nansum(graph.measured[kind])))
    for seconds in (report.graph_seconds, report.eager_seconds, report.instrumented_seconds):
        assert math.isfinite(seconds) and seconds > 0
    meta = graph.metadata["profile"]
    assert meta["kind"] == kind and meta["timer"] == timer and meta["iterations"] == 3
    assert graph.metadata["zoo"] == "resnet" and graph.metadata["training"] is False
    summary = report.summary()
    assert summary["ops"] == graph.num_ops and summary["match_rate"] == round(report.match_rate, 4)


@pytest.mark.expensive  # profiles a training step; CI runs it
def test_training_graph_and_the_simulator_uses_the_measured_kind(tmp_path) -> None:
    before = torch.get_num_threads()
    graph, report = profile_graph(TRANSFORMER, training=True, iterations=2, warmup=1)
    assert torch.get_num_threads() == before
    assert report.training and graph.metadata["training"] is True
    assert report.match_rate >= 0.95
    assert measured_share(graph, report.kind) >= 0.95
    assert report.folded_nodes > 0  # views and getitem ran too, outside every op

    path = graph.save(tmp_path / "g.json")
    loaded = CompGraph.load(path)
    np.testing.assert_array_equal(loaded.measured[report.kind], graph.measured[report.kind])
    cluster = machine_cluster(device_of(report.kind))
    step = simulate(loaded, cluster).step_time
    times = loaded.measured[report.kind]
    roofline = cluster.devices[0].roofline_time(loaded.flops, loaded.bytes_accessed)
    expected = float(np.where(np.isnan(times), roofline, times).sum())  # one device: serial
    assert math.isfinite(step) and step == pytest.approx(expected, rel=1e-9)
    other = machine_cluster(device_of("cpu-other-t1"))  # no measured times for that kind
    assert simulate(loaded, other).step_time == pytest.approx(float(roofline.sum()), rel=1e-9)


def test_a_module_with_inputs_and_a_meta_model() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    graph, report = profile_graph(model, torch.zeros(3, 8), iterations=2, warmup=0, name="mlp")
    assert graph.name == "mlp" and report.match_rate == 1.0
    assert math.isfinite(report.eager_seconds)
    with torch.device("meta"):
        meta = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh())
    graph, report = profile_graph(meta, torch.zeros(3, 8, device="meta"), iterations=2, warmup=0)
    assert graph.name == "Sequential" and report.match_rate == 1.0
    assert math.isnan(report.eager_seconds)  # no weights to run eagerly; the graph ran
    assert report.summary()["eager_seconds"] is None


def test_an_op_that_fails_to_run_is_named() -> None:
    model = torch.nn.Embedding(4, 8)
    too_large = torch.full((2, 3), 10, dtype=torch.long)  # fine for the fake trace, not for real
    with pytest.raises(ValueError, match=r"op 'embedding' \(embedding\) failed to run"):
        profile_graph(model, too_large, iterations=1, warmup=0, name="bad")


def test_no_matching_event_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiler, "_profiler_samples", lambda prof, timing: {})
    model = torch.nn.Linear(4, 4)
    with pytest.raises(ValueError, match="no profiler event matched"):
        profile_graph(model, torch.zeros(2, 4), iterations=1, warmup=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"iterations": 0}, r"iterations must be an integer in 1\.\.1000, got 0"),
        ({"iterations": 10**9}, r"iterations must be an integer in 1\.\.1000, got 1000000000"),
        ({"iterations": 2.0}, r"iterations must be an integer in 1\.\.1000, got 2\.0"),
        ({"warmup": -1}, r"warmup must be an integer in 0\.\.1000, got -1"),
        ({"warmup": 10**9}, r"warmup must be an integer in 0\.\.1000"),
        ({"threads": 0}, r"threads must be an integer in 1\.\.1024, got 0"),
        ({"threads": 10**6}, r"threads must be an integer in 1\.\.1024"),
        ({"timer": "stopwatch"}, "unknown timer 'stopwatch'"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        profile_graph(RESNET, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_without_a_gpu() -> None:
    with pytest.raises(ValueError, match="^no CUDA device"):
        profiler.check_device("cuda")
    with pytest.raises(ValueError, match="^no CUDA device"):
        profile_graph(RESNET, device="cuda:0")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("pipedream:vgg16", "cannot profile 'pipedream:vgg16'"),
        ("torch:nosuchnet", "unknown zoo model 'nosuchnet'"),
        (42, "expects a zoo spec"),
    ],
)
def test_bad_sources(source: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        profile_graph(source)  # type: ignore[arg-type]


def test_report_counts() -> None:
    report = ProfileReport(
        "g",
        "k",
        "cpu",
        False,
        1,
        1,
        0,
        "clock",
        op_names=["a", "b", "c", "d"],
        unmatched_ops=["d"],
    )
    assert report.matched == 3 and report.match_rate == 0.75
    assert ProfileReport("g", "k", "cpu", False, 1, 1, 0, "clock", op_names=[]).match_rate == 1.0


def test_profiled_graph_has_shapes() -> None:
    graph, _ = profile_graph(TRANSFORMER, iterations=1, warmup=0, timer="clock")
    assert graph.has_shapes and all(s is not None for s in graph.output_shapes)
    assert all(d is not None for d in graph.output_dtypes)


def test_a_run_moved_to_a_device_computes_the_same() -> None:
    """The CPU-side half of profiling on a GPU: the placeholder values, constants and the ops'
    device arguments move (here to the CPU itself), and the graph computes what it did."""
    from graphopt.importers import torch as torch_importer

    work, name, _ = profiler._zoo_workload(TRANSFORMER, False, None)
    inputs = torch_importer._as_tuple(work.inputs)
    kwargs = dict(work.kwargs)
    captured = profiler._capture(work.model, inputs, (), kwargs, None, False, name)
    args, kw = profiler._real_inputs(inputs), profiler._real_inputs(kwargs)
    values = profiler._placeholder_values(captured, args, kw)
    with torch.no_grad():
        before = profiler._flat_module(captured.gm)(*values)
    with_device = [n for n in captured.gm.graph.nodes if "device" in n.kwargs]
    assert with_device  # arange, full: ops that create tensors on a device
    moved, args2, kw2 = profiler._to_device(
        captured, work.model, values, args, kw, torch.device("cpu")
    )
    assert all(n.kwargs["device"] == torch.device("cpu") for n in with_device)
    assert len(moved) == len(values) and len(args2) == len(args) and kw2.keys() == kw.keys()
    with torch.no_grad():
        after = profiler._flat_module(captured.gm)(*moved)
    for a, b in zip(
        torch.utils._pytree.tree_leaves(before), torch.utils._pytree.tree_leaves(after), strict=True
    ):
        torch.testing.assert_close(a, b)


def test_timer_profiler_is_refused_off_the_cpu(monkeypatch) -> None:
    monkeypatch.setattr(profiler, "check_device", lambda device: None)
    with pytest.raises(ValueError, match="profile on cuda with timer 'clock'"):
        profile_graph(RESNET, device="cuda", timer="profiler")


class _FakeEvent:
    """Stands in for ``torch.cuda.Event``: its time is the calls counted between two records."""

    calls = 0

    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0

    def record(self) -> None:
        self.at = _FakeEvent.calls

    def elapsed_time(self, other: _FakeEvent) -> float:  # milliseconds
        return float(other.at - self.at)


def test_cuda_op_time_is_the_mean_of_back_to_back_calls(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)

    def counted(op):
        def call(*args):
            _FakeEvent.calls += 1
            return op(*args)

        call._schema = op._schema  # type: ignore[attr-defined]
        return call

    add, add_ = counted(torch.ops.aten.add.Tensor), counted(torch.ops.aten.add_.Tensor)
    times: dict[str, list[int]] = {}
    gm = torch.fx.symbolic_trace(torch.nn.Identity())
    runner = profiler._Runner(gm, clock=True, times=times, cuda=True)
    x = torch.ones(3)
    for name, op in (("pure", add), ("inplace", add_)):
        runner.node_name = name
        out = runner.call_function(op, (x, x), {})
    runner.sync()
    # One untimed call for the result, then CUDA_REPEATS timed ones (1 ms each) for a pure op;
    # an op with a mutable schema runs once, between the events.
    assert _FakeEvent.calls == 1 + profiler.CUDA_REPEATS + 1
    assert times == {"pure": [1_000_000], "inplace": [1_000_000]}
    assert torch.equal(out, torch.full((3,), 2.0))  # add_ ran once on x: 1 -> 2


def test_mutates_reads_the_schema() -> None:
    assert not profiler._mutates(torch.ops.aten.add.Tensor)
    assert profiler._mutates(torch.ops.aten.add_.Tensor)
    assert profiler._mutates(lambda x: x)  # unknown effects
