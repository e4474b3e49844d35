"""The learned per-op runtime model: its features, file, predictions, and a cluster's
``op_times`` (the simulator takes the model's times where nothing was measured)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from graphopt.costmodel.op_fit import fit_op_model, op_errors
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device
from graphopt.op_model import (
    FEATURES,
    MAX_LOG_RATIO,
    MAX_OP_SECONDS,
    OP_FEATURE_VERSION,
    OpModel,
    op_features,
)
from graphopt.sim import simulate

KIND = "cpu-test"
DEVICE = Device("cpu0", KIND, 1e11, 2e10, 1e10, 2e-6)

# The law the synthetic measurements follow: a per-type share of the roofline plus the overhead.
SHARE = {"mm": 0.5, "relu": 0.25, "add": 0.8}


def law(op_type: str, flops: float, nbytes: float) -> float:
    roofline = max(flops / DEVICE.peak_flops, nbytes / DEVICE.mem_bandwidth)
    return roofline / SHARE[op_type] + DEVICE.launch_overhead


def chain(name: str, family: str, sizes: list[int], measured: bool = True) -> CompGraph:
    """A chain mm -> relu -> add per size, with shapes, measured by :func:`law`."""
    ops = []
    for k, n in enumerate(sizes):
        mm_flops, mm_bytes = 2.0 * n**3, 4.0 * 3 * n * n
        for op_type, flops, nbytes in (
            ("mm", mm_flops, mm_bytes),
            ("relu", 0.0, 8.0 * n * n),
            ("add", 0.0, 12.0 * n * n),
        ):
            ops.append(
                Op(
                    f"{op_type}{k}",
                    op_type,
                    flops=flops,
                    bytes_accessed=nbytes,
                    output_bytes=4.0 * n * n,
                    measured={KIND: law(op_type, flops, nbytes)} if measured else {},
                    output_shapes=((n, n),),
                    output_dtypes=("float32",),
                    input_shapes=((n, n), (n, n)) if op_type != "relu" else ((n, n),),
                )
            )
    edges = [(a.name, b.name, a.output_bytes) for a, b in zip(ops, ops[1:], strict=False)]
    return CompGraph.build(name, ops, edges, metadata={"zoo": family})


@pytest.fixture(scope="module")
def graphs() -> list[CompGraph]:
    return [
        chain("a", "fa", [32, 64, 128, 256, 512]),
        chain("b", "fb", [48, 96, 192, 384, 768]),
        chain("c", "fc", [40, 80, 160, 320, 640]),
    ]


@pytest.fixture(scope="module")
def model(graphs: list[CompGraph]) -> OpModel:
    return fit_op_model(graphs[:2], [DEVICE], rounds=150)


def test_features_read_shapes_and_device(graphs):
    x = op_features(graphs[0], DEVICE, {"mm": 0}, {"contraction": 0})
    assert x.shape == (15, len(FEATURES))
    row = dict(zip(FEATURES, x[0], strict=True))
    assert row["type"] == 0 and row["class"] == 0
    assert row["out_rank"] == 2 and row["out_dim0"] == pytest.approx(math.log1p(32))
    assert row["in1_dim1"] == pytest.approx(math.log1p(32)) and row["itemsize"] == 4
    assert math.isnan(x[1, 0])  # relu: no code given
    assert row["launch_us"] == pytest.approx(2.0)


def test_predicts_a_held_out_family(graphs, model):
    errors = op_errors(model, graphs[2], DEVICE)
    assert np.isfinite(errors).all()
    assert np.median(np.abs(errors)) < 0.15  # the law is a per-type ratio: learnable


def test_unseen_type_and_kind_fall_back(graphs, model):
    other = Device("gpu0", "other-kind", 1e13, 1e12, 1e10, 5e-6)
    assert np.isnan(model.predict(graphs[0], other)).all()
    data = graphs[0].to_json_dict()
    data["ops"]["type"] = ["gelu" if t == "relu" else t for t in data["ops"]["type"]]
    renamed = CompGraph.from_json_dict(data)
    predicted = model.predict(renamed, DEVICE)
    gelu = np.array([t == "gelu" for t in renamed.op_types])
    assert np.isnan(predicted[gelu]).all() and np.isfinite(predicted[~gelu]).all()


def test_file_round_trip_and_version_refused(tmp_path, graphs, model):
    path = model.save(tmp_path / "ops.json")
    back = OpModel.load(path)
    np.testing.assert_array_equal(back.predict(graphs[2], DEVICE), model.predict(graphs[2], DEVICE))
    data = json.loads(path.read_text())
    data["op_feature_version"] = OP_FEATURE_VERSION + 1
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"op-feature version {OP_FEATURE_VERSION + 1}") as info:
        OpModel.load(old)
    assert f"op-feature version {OP_FEATURE_VERSION}:" in str(info.value)
    assert "graphopt costmodel ops train" in str(info.value)
    with pytest.raises(ValueError, match="does not exist; train one with graphopt costmodel"):
        OpModel.load(tmp_path / "missing.json")


def _leaves(text: str, value: str) -> str:
    """``text`` with the first leaf of its first tree set to ``value``."""
    head, _, rest = text.partition("leaf_value=")
    return head + "leaf_value=" + value + " " + rest.split(" ", 1)[1]


def _huge(text: str) -> str:
    """``text`` with every leaf 50: 50 log seconds per tree, more than any float holds."""
    return "\n".join(
        "leaf_value=" + " ".join(["50"] * len(line.split()))
        if line.startswith("leaf_value=")
        else line
        for line in text.split("\n")
    )


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d.update(booster="hello"), "'booster': not LightGBM's text model"),
        (
            lambda d: d.update(booster=d["booster"].replace("num_class=1\n", "")),
            "'booster': LightGBM's header has no num_class",
        ),
        (lambda d: d.update(booster=d["booster"].split("end of trees")[0]), "is cut short"),
        (
            lambda d: d.update(booster=_leaves(d["booster"], "nan")),
            "tree 0: leaf_value holds a value that is not a finite number",
        ),
        (
            lambda d: d.update(booster=_huge(d["booster"])),
            "largest leaves add up to 7500 .*at most 690",
        ),
        (lambda d: d.update(metadata="trained"), "'metadata' must be an object, got str"),
        (lambda d: d.update(ranges={"mm": [0, "x", 2]}), "'ranges' of op type 'mm' must be"),
        (lambda d: d.update(ranges={"mm": [0, math.nan, 2]}), "'ranges' of op type 'mm' must be"),
        (lambda d: d.update(types="mm"), "'types' must be a list of names"),
        (lambda d: d.pop("booster"), "missing the key 'booster'"),
    ],
    ids=[
        "not-lightgbm",
        "no-header-key",
        "cut",
        "nan-leaf",
        "huge-leaves",
        "metadata",
        "ranges",
        "nan-range",
        "types",
        "missing",
    ],
)
def test_a_damaged_model_file_is_one_line_naming_file_and_key(tmp_path, model, edit, match):
    """Checked when the file is read: before LightGBM sees it (#40: a ``[LightGBM] [Fatal]`` line
    and a LightGBMError; NaN leaves that silently priced every op by the roofline; an overflow
    warning from numpy; "dictionary update sequence element #0" for a string metadata)."""
    data = model.to_json_dict()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=match) as info:
        OpModel.load(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def _every_leaf(text: str, value: float) -> str:
    """``text`` with every leaf set to ``value``: each tree adds ``value``, wherever an op goes."""
    return "\n".join(
        "leaf_value=" + " ".join([repr(value)] * len(line.split()))
        if line.startswith("leaf_value=")
        else line
        for line in text.split("\n")
    )


def test_leaves_just_under_the_cap_load_but_their_absurd_times_are_refused(tmp_path, graphs, model):
    """#40: leaves adding up to just under :data:`MAX_LOG_RATIO` passed and priced each op at
    ``exp(689)`` times its roofline (finite, absurd)."""
    data = model.to_json_dict()
    trees = data["booster"].count("leaf_value=")
    data["booster"] = _every_leaf(data["booster"], (MAX_LOG_RATIO - 1) / trees)
    path = tmp_path / "near.json"
    path.write_text(json.dumps(data))
    near = OpModel.load(path)  # the file itself is well-formed
    with pytest.raises(ValueError) as info:
        near.predict(graphs[2], DEVICE)
    message = str(info.value)
    assert message.startswith(f"{path}: predicts ") and "\n" not in message
    assert f"above the bound of {MAX_OP_SECONDS:g} s per op for op 'mm0' on {KIND}" in message
    assert "train the model again with graphopt costmodel ops train" in message
    predicted = model.predict(graphs[2], DEVICE)  # a trained model is far below the bound
    assert np.nanmax(predicted) < 1e-3 * MAX_OP_SECONDS


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (
            "version",
            "1",
            "'version' must be the integer 1 (a JSON number, not a string), got \"1\"",
        ),
        (
            "version",
            True,
            "'version' must be the integer 1 (a JSON number, not a string), got true",
        ),
        ("op_feature_version", "1", "'op_feature_version' must be the integer 1"),
    ],
)
def test_a_version_that_is_not_an_integer_says_which_integer(tmp_path, model, key, value, says):
    """#40: ``"version": "1"`` said "op model of file version '1' ... reads file version 1"."""
    data = {**model.to_json_dict(), key: value}
    path = tmp_path / "v.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as info:
        OpModel.load(path)
    assert str(info.value).startswith(f"{path}: {says}") and "\n" not in str(info.value)


def test_a_pickled_model_file_is_named_a_pickle(tmp_path):
    """#40: a pickle where an op model was expected said "can't decode byte 0x80"."""
    import pickle

    path = tmp_path / "m.json"
    path.write_bytes(pickle.dumps({"format": "graphopt-op-model"}, protocol=4))
    with pytest.raises(ValueError, match="is a pickle file \\(protocol 4\\), which graphopt never"):
        OpModel.load(path)


def test_the_canonical_booster_predicts_as_the_trained_one(graphs, model):
    """LightGBM is given the checked, canonical text (:mod:`graphopt.booster_text`): the
    predictions are those of the text LightGBM wrote, bit for bit."""
    import lightgbm

    raw = lightgbm.Booster(model_str=model.booster_text)
    x = op_features(graphs[2], DEVICE, model.type_codes, model.class_codes)
    np.testing.assert_array_equal(model.booster().predict(x), raw.predict(x))


def cluster_of(**options) -> Cluster:
    return Cluster("one", (DEVICE,), np.zeros((1, 1)), np.zeros((1, 1)), **options)


def test_cluster_op_times_checks():
    with pytest.raises(
        ValueError, match="op_times: learned needs op_model.*graphopt costmodel ops"
    ):
        cluster_of(op_times="learned")
    with pytest.raises(ValueError, match="no efficiency table; fit one with graphopt calibrate"):
        cluster_of(op_times="calibrated")
    with pytest.raises(ValueError, match="unknown op_times 'guess'; choose one of: roofline"):
        cluster_of(op_times="guess")
    with pytest.raises(ValueError, match="op_model is only read with op_times: learned"):
        cluster_of(op_model="m.json")
    assert cluster_of().fingerprint == cluster_of(op_times="roofline").fingerprint
    assert "op_times" not in cluster_of().to_dict()


def test_simulator_takes_the_learned_times(tmp_path, graphs, model):
    model.save(tmp_path / "ops.json")
    learned = cluster_of(op_times="learned", op_model="ops.json").to_dict()
    (tmp_path / "c.json").write_text(json.dumps(learned))
    cluster = Cluster.load(tmp_path / "c.json")  # op_model relative to the cluster file
    assert cluster.op_model == str(tmp_path / "ops.json")
    assert cluster.fingerprint != cluster_of().fingerprint
    bare = chain("c", "fc", [40, 80, 160, 320, 640], measured=False)
    step = simulate(bare, cluster).step_time  # one device, a chain: the sum of its op times
    assert step == pytest.approx(float(model.predict(bare, DEVICE).sum()), rel=1e-9)
    assert step != pytest.approx(simulate(bare, cluster_of()).step_time, rel=1e-3)
    measured = graphs[2]  # measured ops keep their measured times
    assert simulate(measured, cluster).step_time == pytest.approx(
        float(measured.measured[KIND].sum()), rel=1e-9
    )
    # shapes are not in the graph's fingerprint; the simulator's cache keys on them here
    from graphopt.sim import Simulator

    data = bare.to_json_dict()
    for key in ("shapes", "dtypes", "input_shapes"):
        data["ops"].pop(key, None)
    shapeless = CompGraph.from_json_dict(data)
    assert shapeless.fingerprint == bare.fingerprint and bare.has_shapes
    sim = Simulator()
    assert sim.prepare(bare, cluster) is not sim.prepare(shapeless, cluster)
    assert sim.prepare(bare, cluster_of()) is sim.prepare(shapeless, cluster_of())


def test_prices_only_what_resembles_the_measured_ops(graphs, model):
    huge = chain("h", "fh", [40, 8192], measured=False)  # mm of 8192: far beyond the measured
    predicted = model.predict(huge, DEVICE)
    assert np.isfinite(predicted[:3]).all() and np.isnan(predicted[3:]).all()
    one_family = fit_op_model([graphs[0], chain("d", "fa", [48, 96])], [DEVICE], rounds=20)
    assert all(r[2] == 1 for r in one_family.ranges.values())
    assert np.isnan(one_family.predict(graphs[2], DEVICE)).all()  # measured in one family only
