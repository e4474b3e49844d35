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
        says = rf"{path.name} (is not a plain weights file|is a pickle file .*never loads)"
        with pytest.raises(ValueError, match=says):
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


# ---------------------------------------------------------------------- hostile sizes
def hostile_run(tmp_path, *, observation=None, action=None, **config):
    """A run directory of the tiny placement model whose model.json or config.yaml is edited:
    ``observation`` / ``action`` replace a member of the observation space or the action space,
    ``config`` keys replace the config's (policy_kwargs merged). The config holds every key,
    as a run's config.yaml does."""
    import yaml
    from tiny_runs import TINY

    from graphopt.train.config import TrainConfig

    tmp_path.mkdir(parents=True, exist_ok=True)
    checkpoint.write_model_info(tmp_path, tiny_model(), "placement")
    info = json.loads((tmp_path / "model.json").read_text())
    info["observation_space"]["spaces"].update(observation or {})
    if action is not None:
        info["action_space"] = action
    (tmp_path / "model.json").write_text(json.dumps(info))
    kwargs = {**TINY["policy_kwargs"], **config.pop("policy_kwargs", {})}  # type: ignore[dict-item]
    data = {**TrainConfig().to_dict(), **TINY, **config, "policy_kwargs": kwargs}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(data))
    return tmp_path


def box(*shape: int) -> dict:
    return {"type": "Box", "shape": list(shape), "dtype": "float32", "low": -1.0, "high": 1.0}


@pytest.mark.parametrize(
    ("observation", "action", "message"),
    [
        (  # a billion op slots: 13 billion numbers, refused before one is allocated
            {"op_features": box(10**9, 13)},
            None,
            r"observation_space\.op_features \(shape \[1000000000, 13\]\) holds 13,000,000,000 "
            r"entries; a space may hold at most 67,108,864",
        ),
        (  # within the numbers a space may hold, one op slot beyond an encoding's (the
            # smallest such space: a larger one only takes longer to read)
            {"op_features": box(2**20 + 1, 13)},
            None,
            r"observation_space\.op_features has 1,048,577 op slots; an encoding has at most "
            r"1,048,576 \(graphopt\.encoding\.MAX_OPS\)",
        ),
        (
            {"edge_index": box(2, 2**23 + 1)},
            None,
            r"observation_space\.edge_index has 8,388,609 edge slots; .*MAX_EDGES",
        ),
        (
            {"device_features": box(10**6, 5)},
            None,
            r"observation_space\.device_features has 1,000,000 device rows; .* at most 16",
        ),
        (
            {f"extra{i}": box(1) for i in range(100)},
            None,
            r"observation_space: a Dict of 110 spaces at level 1; a Dict holds at most 64 spaces",
        ),
        (  # a billion actions, written as one run: refused before the run is expanded
            None,
            {
                "type": "MultiDiscrete",
                "nvec": [[2, 10**9]],
                "start": [[0, 10**9]],
                "dtype": "int64",
            },
            r"action_space\.nvec holds 1,000,000,000 entries",
        ),
        (
            None,
            {
                "type": "MultiDiscrete",
                "nvec": [[10**9, 227]],
                "start": [[0, 227]],
                "dtype": "int64",
            },
            r"action_space\.nvec holds 1,000,000,000; each entry has 1\.\.4096 values",
        ),
        (  # within the bound of any space, beyond the run's cluster (2 devices) and priorities
            None,
            {"type": "MultiDiscrete", "nvec": [[64, 227]], "start": [[0, 227]], "dtype": "int64"},
            r"action_space\.nvec has 64 values per op; the run's cluster and num_priorities "
            r"\(.*config\.yaml\) give at most 8",
        ),
        (None, {"type": "Discrete", "n": 10**9}, r"action_space\.n is 1,000,000,000"),
        (
            None,
            {"type": "MultiBinary", "n": [10**5, 10**5]},
            r"action_space\.n holds 10,000,000,000",
        ),
    ],
)
def test_hostile_sizes_in_model_json_are_refused_naming_file_and_field(
    tmp_path, observation, action, message
):
    run = hostile_run(tmp_path, observation=observation, action=action)
    with pytest.raises(ValueError, match=message) as e:
        checkpoint.read_model_info(run)
    assert str(e.value).startswith(str(run / "model.json")) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"policy_kwargs": {"hidden": 10**9}},
            r"policy_kwargs\.hidden is 1,000,000,000; at most 4,096",
        ),
        (
            {"policy_kwargs": {"heads": 1e9}},
            r"policy_kwargs\.heads is 1,000,000,000\.0; at most 64",
        ),
        (
            {"policy_kwargs": {"net_arch": [64, 10**8]}},
            r"policy_kwargs\.net_arch\[1\] is 100,000,000",
        ),
        ({"policy_kwargs": {"net_arch": {"pi": [10**8]}}}, r"policy_kwargs\.net_arch\.pi\[0\]"),
        ({"max_ops": 100}, r"op_features has 227 op slots but .*config\.yaml sets max_ops: 100"),
        ({"n_steps": 10**12}, r"config\.yaml: n_steps 1,000,000,000,000 x .* GB, more than this"),
    ],
)
def test_hostile_sizes_in_config_yaml_are_refused_naming_file_and_field(tmp_path, config, message):
    run = hostile_run(tmp_path, **config)
    with pytest.raises(ValueError, match=message) as e:
        checkpoint.read_model_info(run)
    assert str(run) in str(e.value) and "\n" not in str(e.value)


def test_the_run_as_written_passes_and_edit_runs_are_held_to_their_candidates(tmp_path):
    obs, act = checkpoint.read_model_info(hostile_run(tmp_path))  # the tiny run as written
    assert obs["op_features"].shape == (227, 13) and act.nvec.max() == 2
    env = make_env("placement-edit", ["txl-tiny"], "v100-nvlink-2", candidates=4, horizon=8)
    model = PPO(MovePolicy, env, n_steps=16, batch_size=16, policy_kwargs={"hidden": 8})
    checkpoint.write_model_info(tmp_path, model, "placement-edit")
    (tmp_path / "config.yaml").write_text("task: placement-edit\ncandidates: 4\n")
    assert checkpoint.read_model_info(tmp_path)[1].n == 5  # 0 passes, then 4 candidates
    (tmp_path / "config.yaml").write_text("task: placement-edit\ncandidates: 2\n")
    with pytest.raises(ValueError, match=r"action_space\.n is 5; .* candidates: 2, so at most 3"):
        checkpoint.read_model_info(tmp_path)


def test_a_model_json_too_large_or_too_deep_is_refused_unread(tmp_path):
    hostile_run(tmp_path)
    (tmp_path / "model.json").write_text(" " * (checkpoint.MAX_INFO_BYTES + 1))
    with pytest.raises(
        ValueError, match=r"model\.json: not a graphopt model description: 4,194,305 bytes"
    ):
        checkpoint.read_model_info(tmp_path)
    (tmp_path / "model.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"model\.json: not a graphopt model description"):
        checkpoint.read_model_info(tmp_path)


@pytest.mark.expensive  # a subprocess importing torch; the refusals themselves are tested above
def test_eval_of_a_hostile_run_is_refused_under_a_memory_limit(tmp_path):
    """``graphopt eval`` of a run whose model.json asks for a billion op slots and actions and
    whose config a billion hidden units, in a process of at most 8 GB of address space (a
    refusal takes about 1 GB; the op features alone would take 52 GB): one line, exit 2."""
    import os
    import resource
    import subprocess
    import sys
    from pathlib import Path

    run = hostile_run(
        tmp_path / "run",
        observation={"op_features": box(10**9, 13)},
        action={
            "type": "MultiDiscrete",
            "nvec": [[16, 10**9]],
            "start": [[0, 10**9]],
            "dtype": "int64",
        },
        policy_kwargs={"hidden": 10**9},
    )
    torch.save(checkpoint.model_weights(tiny_model()), run / "best_model.pt")
    limit = 8 * 2**30

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "graphopt", "eval", str(run), "--graphs", "txl-tiny"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=cap,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},  # CUDA reserves address space at start
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"graphopt: error: {run / 'model.json'}: ")
    assert "observation_space.op_features" in line and "MemoryError" not in proc.stderr


def test_a_key_missing_from_config_yaml_takes_the_defaults_given(tmp_path):
    run = hostile_run(
        tmp_path,
        action={"type": "MultiDiscrete", "nvec": [[8, 227]], "start": [[0, 227]], "dtype": "int64"},
    )
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(
        "\n".join(line for line in text.splitlines() if not line.startswith("num_priorities"))
    )
    with pytest.raises(ValueError, match=r"8 values per op; .* give at most 2"):
        checkpoint.read_model_info(run)  # without defaults: 2 devices, no priorities
    checkpoint.read_model_info(run, {"num_priorities": 8})


def test_a_cluster_the_caller_resolved_is_not_resolved_again(tmp_path, monkeypatch):
    # load_model passes the run's resolved cluster (TrainConfig.resolved_cluster) down: its
    # device count bounds the action space, and config.yaml's cluster is not read again
    import graphopt.hardware
    from graphopt.hardware import Cluster, get_cluster

    run = hostile_run(
        tmp_path,
        action={"type": "MultiDiscrete", "nvec": [[4, 227]], "start": [[0, 227]], "dtype": "int64"},
        num_priorities=1,
    )
    four = get_cluster("v100-nvlink-4")

    def never(spec):
        if not isinstance(spec, Cluster):
            raise AssertionError(f"cluster {spec!r} resolved again")
        return spec

    with pytest.raises(ValueError, match=r"4 values per op; .* give at most 2"):
        checkpoint.read_model_info(run)  # config.yaml's v100-nvlink-2
    monkeypatch.setattr(graphopt.hardware, "get_cluster", never)
    obs, act = checkpoint.read_model_info(run, cluster=four)
    assert act.nvec.max() == 4
