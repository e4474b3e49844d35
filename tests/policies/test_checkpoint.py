"""Model files hold weights only: written atomically, read with torch.load(weights_only=True), and
anything else (an SB3 zip, a pickled object) refused without running it."""

from __future__ import annotations

import json

import pytest
import torch
from crafted_files import assert_payload_runs, crafted_pickle, crafted_pt, crafted_sb3_zip
from stable_baselines3 import PPO

from envs import make_env
from policies import GOPolicy, MovePolicy, checkpoint

torch.set_num_threads(1)
NET = {"hidden": 16, "sage_layers": 1, "attn_layers": 1, "heads": 2, "segment_len": 32}


def tiny_model(seed: int = 0) -> PPO:
    env = make_env("placement", ["txl-tiny"], "v100-nvlink-2", seed=0)
    kwargs = {**NET, "task": "placement"}
    return PPO(
        GOPolicy, env, n_steps=16, batch_size=16, n_epochs=1, seed=seed, policy_kwargs=kwargs
    )


@pytest.mark.parametrize("task", ["placement", "joint", "placement-edit"])
def test_spaces_survive_json(task):
    settings = {"candidates": 4, "horizon": 8} if task == "placement-edit" else {}
    env = make_env(task, ["txl-tiny"], "v100-nvlink-2", **settings)
    for space in (env.observation_space, env.action_space):
        text = json.dumps(checkpoint.space_to_json(space), allow_nan=False)  # strict JSON
        assert len(text) < 4000  # uniform bounds are one number, not one per entry
        again = checkpoint.space_from_json(json.loads(text))
        assert again == space and type(again) is type(space)


def test_a_bad_space_description_is_refused():
    with pytest.raises(ValueError, match="unknown space type"):
        checkpoint.space_from_json({"type": "Tuple"})
    with pytest.raises(ValueError, match="dtype 'object'"):
        checkpoint.space_from_json(
            {"type": "Box", "shape": [2], "dtype": "object", "low": 0, "high": 1}
        )
    with pytest.raises(ValueError, match="2 numbers for shape"):
        checkpoint.space_from_json(
            {"type": "Box", "shape": [3], "dtype": "float32", "low": [0, 1], "high": 1}
        )


def test_weights_round_trip(tmp_path):
    model = tiny_model(seed=0)
    model.learn(16)
    path = tmp_path / "checkpoints" / "last.pt"
    checkpoint.save_weights(model, path)
    assert path.exists() and not list(tmp_path.rglob("*.tmp*"))
    raw = torch.load(path, weights_only=True)  # a plain weights file
    assert raw["format"] == "graphopt-ppo-weights" and raw["num_timesteps"] == 16

    other = tiny_model(seed=1)
    assert any(
        not torch.equal(a, b)
        for a, b in zip(
            other.policy.state_dict().values(), model.policy.state_dict().values(), strict=True
        )
    )
    checkpoint.load_weights(other, checkpoint.read_weights(path), path)
    for key, value in model.policy.state_dict().items():
        assert torch.equal(other.policy.state_dict()[key], value), key
    assert other.num_timesteps == 16 and other._n_updates == model._n_updates
    saved = model.policy.optimizer.state_dict()["state"]
    loaded = other.policy.optimizer.state_dict()["state"]
    assert saved.keys() == loaded.keys() and torch.equal(saved[0]["exp_avg"], loaded[0]["exp_avg"])


def test_weights_of_another_network_are_refused(tmp_path):
    path = tmp_path / "best_model.pt"
    checkpoint.save_weights(tiny_model(), path)
    env = make_env("placement-edit", ["txl-tiny"], "v100-nvlink-2", candidates=4, horizon=8)
    other = PPO(MovePolicy, env, n_steps=16, batch_size=16, policy_kwargs={"hidden": 8})
    with pytest.raises(ValueError, match=r"best_model\.pt do not fit the model"):
        checkpoint.load_weights(other, checkpoint.read_weights(path), path)


def test_other_files_are_not_model_files(tmp_path):
    plain = tmp_path / "plain.pt"
    torch.save({"weights": torch.zeros(3)}, plain)
    with pytest.raises(ValueError, match=r"plain\.pt is not a graphopt model file"):
        checkpoint.read_weights(plain)
    text = tmp_path / "text.pt"
    text.write_text("not torch")
    with pytest.raises(ValueError, match=r"text\.pt is not a plain weights file"):
        checkpoint.read_weights(text)
    with pytest.raises(ValueError, match="no such model file"):
        checkpoint.read_weights(tmp_path / "missing.pt")


def test_crafted_files_are_refused_and_nothing_runs(tmp_path):
    assert_payload_runs(tmp_path / "live")  # these payloads do run when unpickled unsafely
    marker = tmp_path / "marker"
    for path in (
        crafted_pt(tmp_path / "best_model.pt", marker),
        crafted_pickle(tmp_path / "final_model.pt", marker),
        crafted_sb3_zip(tmp_path / "renamed.pt", marker),  # an SB3 zip under a .pt name
    ):
        with pytest.raises(ValueError, match=rf"{path.name} is not a plain weights file"):
            checkpoint.read_weights(path)
        assert not marker.exists(), path.name
    zipped = crafted_sb3_zip(tmp_path / "best_model.zip", marker)
    with pytest.raises(ValueError, match=r"best_model\.zip is an SB3 \.zip model"):
        checkpoint.read_weights(zipped)
    assert not marker.exists()


def test_model_info_round_trip_and_refusals(tmp_path):
    model = tiny_model()
    checkpoint.write_model_info(tmp_path, model, "placement")
    obs, act = checkpoint.read_model_info(tmp_path)
    assert checkpoint.same_spaces(model, obs, act)
    (tmp_path / "model.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match=r"model\.json: not a graphopt model description"):
        checkpoint.read_model_info(tmp_path)
    (tmp_path / "model.json").unlink()
    with pytest.raises(ValueError, match=r"has no model\.json"):
        checkpoint.read_model_info(tmp_path)


def test_a_torch_whose_safe_loader_can_be_bypassed_reads_nothing(tmp_path, monkeypatch):
    path = tmp_path / "best_model.pt"
    checkpoint.save_weights(tiny_model(), path)
    monkeypatch.setattr(checkpoint, "_torch_version", lambda: (2, 5))
    with pytest.raises(ValueError, match=r"not reading .*best_model\.pt: torch .* torch>=2\.6"):
        checkpoint.read_weights(path)
