from __future__ import annotations

import numpy as np
import pytest

from envs.reference import reference_decision
from graphopt.decoders.decision import LIMIT, DecoderSettings, channels, clean_outputs, decode
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.tasks import ONE_SHOT_TASKS
from graphopt.workloads import resolve_graphs

CLUSTER = get_cluster("v100-nvlink-4")
SIM = Simulator()


def test_channels_per_task():
    assert channels("placement", 2) == ("shift", "gate", "affinity:0", "affinity:1")
    assert channels("scheduling", 4) == ("priority",)
    assert channels("fusion", 4) == ("fusion",)
    assert channels("joint", 3)[-2:] == ("priority", "fusion")
    assert len(channels("joint", 3)) == 2 + 3 + 2


@pytest.mark.parametrize("task", ONE_SHOT_TASKS)
def test_zero_outputs_reproduce_the_reference_exactly(task):
    for graph in resolve_graphs("suite:tiny,pipedream:resnet50"):
        ref = reference_decision(graph, CLUSTER, task, SIM)
        outputs = np.zeros((len(channels(task, 4)), graph.num_ops))
        got = decode(task, graph, CLUSTER, outputs, ref.decision, ref.name)
        filled, expected = got.filled(graph.num_ops), ref.decision.filled(graph.num_ops)
        np.testing.assert_array_equal(filled.placement, expected.placement)
        np.testing.assert_array_equal(filled.fusion, expected.fusion)
        time = SIM.evaluate(graph, CLUSTER, got).step_time
        assert time == ref.measurement.step_time


def test_unanchored_placement_is_heft_lc():
    from graphopt.baselines.heft import heft_contention

    graph = resolve_graphs("wavenet-tiny")[0]
    ref = reference_decision(graph, CLUSTER, "placement", SIM)
    outputs = np.zeros((6, graph.num_ops))
    settings = DecoderSettings(anchor=False, memory=False)
    got = decode("placement", graph, CLUSTER, outputs, ref.decision, ref.name, settings)
    np.testing.assert_array_equal(got.placement, heft_contention(graph, CLUSTER))


def test_joint_decode_is_valid_for_random_outputs():
    rng = np.random.default_rng(0)
    for graph in resolve_graphs("suite:tiny"):
        ref = reference_decision(graph, CLUSTER, "joint", SIM)
        outputs = rng.normal(0, 2, (len(channels("joint", 4)), graph.num_ops))
        got = decode("joint", graph, CLUSTER, outputs, ref.decision, ref.name)
        m = SIM.evaluate(graph, CLUSTER, got)
        assert "illegal" not in m.reason


def test_outputs_are_clipped_and_nan_is_refused_with_the_op_named():
    graph = resolve_graphs("txl-tiny")[0]
    out = np.zeros((1, graph.num_ops))
    out[0, 3] = np.inf
    assert clean_outputs(out, graph, 1)[0, 3] == LIMIT
    out[0, 4] = np.nan
    with pytest.raises(ValueError, match=f"op {graph.op_names[4]!r} \\(index 4\\) is NaN"):
        clean_outputs(out, graph, 1)
    with pytest.raises(ValueError, match="expected \\(2, 227\\)"):
        clean_outputs(out, graph, 2)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown decoder 'hef'; choose one of: heft, heft-lc"):
        DecoderSettings(model="hef")
    with pytest.raises(ValueError, match="anchor must be true or false"):
        DecoderSettings(anchor="yes")  # type: ignore[arg-type]
