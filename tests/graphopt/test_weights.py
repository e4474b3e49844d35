"""Reading a .pt file with weights_only (graphopt.weights): a pickled object is refused in one
line naming the file, nothing in it run, and torch's warnings kept out of the output."""

from __future__ import annotations

import pickle
import warnings

import pytest
import torch

from graphopt.weights import load_pt


class Payload:
    """An object pickling would rebuild by calling code (never, here)."""

    def __reduce__(self):  # pragma: no cover - never unpickled
        return (print, ("ran",))


def test_plain_weights_round_trip(tmp_path):
    path = tmp_path / "w.pt"
    torch.save({"w": torch.ones(2), "n": 3}, path)
    data = load_pt(path, "hint")
    assert data["n"] == 3 and data["w"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_pickled_object_is_one_line_without_torch_warnings(tmp_path, capsys, protocol):
    """#40: a pickled .pt gave torch's pickle-protocol warning and an 8-line message."""
    path = tmp_path / "p.pt"
    path.write_bytes(pickle.dumps({"model": Payload()}, protocol=protocol))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        with pytest.raises(ValueError) as info:
            load_pt(path, "give a model.pt of graphopt costmodel train")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path} is not a plain weights file")
    assert "nothing in it was run: give a model.pt" in message
    assert capsys.readouterr().out == ""  # print was never called
