"""``graphopt costmodel dataset --workers N``: one Ray task per graph, the same dataset as serial."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from graphopt.cli import main


def _dataset(out: Path) -> dict[str, dict[str, np.ndarray]]:
    arrays = {}
    for path in sorted(out.glob("*.npz")):
        with np.load(path, allow_pickle=False) as data:
            arrays[path.name] = {k: data[k] for k in data.files}
    return arrays


def test_two_workers_give_the_serial_dataset(tmp_path: Path):
    from ray_testing import need_ray

    need_ray()
    args = ["costmodel", "dataset", "--graphs", "txl-tiny,gnmt-tiny,rnnlm-tiny", "--task", "joint"]
    args += ["--cluster", "v100-nvlink-2", "--samples", "12", "--seed", "3", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "serial")]) == 0
    assert main([*args, "--workers", "2", "--out", str(tmp_path / "ray")]) == 0
    serial, ray = _dataset(tmp_path / "serial"), _dataset(tmp_path / "ray")
    assert list(serial) == ["0000-txl-tiny.npz", "0001-gnmt-tiny.npz", "0002-rnnlm-tiny.npz"]
    assert list(ray) == list(serial)
    for name, arrays in serial.items():
        assert list(ray[name]) == list(arrays), name
        for key, value in arrays.items():
            assert ray[name][key].dtype == value.dtype, (name, key)
            np.testing.assert_array_equal(ray[name][key], value, err_msg=f"{name}: {key}")
    meta = (tmp_path / "serial" / "meta.json").read_text()
    assert (tmp_path / "ray" / "meta.json").read_text() == meta
    assert json.loads(meta)["graphs"] == ["txl-tiny", "gnmt-tiny", "rnnlm-tiny"]


def test_workers_below_one_is_a_one_line_error(tmp_path: Path, capsys):
    argv = ["costmodel", "dataset", "--graphs", "txl-tiny", "--out", str(tmp_path / "d")]
    assert main([*argv, "--workers", "0"]) == 2
    assert capsys.readouterr().err == "graphopt: error: --workers must be >= 1, got 0\n"
    assert not (tmp_path / "d").exists()
