"""Reading a .pt file with weights_only (graphopt.weights): a pickled object is refused in one
line naming the file, nothing in it run, and torch's warnings kept out of the output."""

from __future__ import annotations

import pickle
import warnings

import pytest
import torch

from graphopt.weights import load_pt, pickle_protocol, pickle_refusal


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
    # #40: a protocol-4 pickle said "Unsupported operand 149"
    assert "\n" not in message and "Unsupported" not in message
    assert message.startswith(f"{path} is a pickle file (protocol {protocol}), which graphopt")
    assert "nothing in it was run); give a model.pt" in message
    assert capsys.readouterr().out == ""  # print was never called


def test_a_pickle_is_told_by_its_first_bytes_a_legacy_torch_file_is_not(tmp_path):
    legacy, zipped, text = tmp_path / "legacy.pt", tmp_path / "zip.pt", tmp_path / "t.json"
    torch.save({"w": torch.ones(1)}, legacy, _use_new_zipfile_serialization=False)
    torch.save({"w": torch.ones(1)}, zipped)
    text.write_text("{}")
    for path in (legacy, zipped, text, tmp_path / "missing"):
        assert pickle_protocol(path) is None and pickle_refusal(path, "x") is None
    assert load_pt(legacy, "hint")["w"].tolist() == [1.0]  # torch's legacy format still reads
    for protocol in (2, 3, 4, 5):
        pickled = tmp_path / f"p{protocol}.json"
        pickled.write_bytes(pickle.dumps([1], protocol=protocol))
        assert pickle_protocol(pickled) == protocol
    assert pickle_refusal(tmp_path / "p4.json", "give a graph file") == (
        f"{tmp_path / 'p4.json'} is a pickle file (protocol 4), which graphopt never loads "
        "(unpickling can run code; nothing in it was run); give a graph file"
    )
