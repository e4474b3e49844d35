"""policies.dedup and the policy's one-embedding-per-distinct-graph rule."""

from __future__ import annotations

import numpy as np
import torch

import envs
from policies.dedup import observation_keys, unique_rows
from policies.sb3_policy import GOPolicy

torch.set_num_threads(1)

GRAPHS = ["txl-tiny", "random-layered-100-s0"]


def _env(**kwargs) -> envs.PlacementEnv:
    return envs.PlacementEnv(graphs=GRAPHS, cluster="v100-nvlink-2", **kwargs)


def _batch(env: envs.PlacementEnv, ids: list[int]) -> dict[str, torch.Tensor]:
    graphs = env.encoded_graphs()
    return {k: torch.as_tensor(np.stack([graphs[i][k] for i in ids])) for k in graphs[0]}


def test_keys_identify_equal_observations_only():
    obs = _batch(_env(), [0, 1, 0, 1, 1])
    keys = observation_keys(obs)
    first, inverse = unique_rows(keys)
    assert first.tolist() == [0, 1] or first.tolist() == [1, 0]
    assert inverse.tolist() in ([0, 1, 0, 1, 1], [1, 0, 1, 0, 0])
    assert torch.equal(keys[first][inverse], keys)
    # SB3 buffers hand back float32 copies: same grouping
    as_float = {k: v.float() for k, v in obs.items()}
    assert torch.equal(unique_rows(observation_keys(as_float))[1], inverse)
    # a single changed feature value makes a new key
    obs["op_features"][2, 5, 3] += 1e-6
    assert len(unique_rows(observation_keys(obs))[0]) == 3


def test_policy_embeds_each_distinct_graph_once():
    env = _env()
    torch.manual_seed(0)
    policy = GOPolicy(
        env.observation_space, env.action_space, lambda _: 1e-3, task=env.task, hidden=16
    )
    plain = GOPolicy(
        env.observation_space,
        env.action_space,
        lambda _: 1e-3,
        task=env.task,
        hidden=16,
        dedup=False,
    )
    plain.load_state_dict(policy.state_dict())
    seen: list[int] = []
    policy.network.encoder.register_forward_hook(
        lambda m, args, out: seen.append(args[0].num_graphs)
    )
    obs = _batch(env, [0, 1, 0, 0, 1, 0])
    with torch.no_grad():
        actions, _, _ = plain(obs)
    values, log_prob, entropy = policy.evaluate_actions(obs, actions)
    assert seen == [2]  # one encoder call, two distinct graphs
    ref_values, ref_log_prob, ref_entropy = plain.evaluate_actions(obs, actions)
    torch.testing.assert_close(values, ref_values)
    torch.testing.assert_close(log_prob, ref_log_prob)
    torch.testing.assert_close(entropy, ref_entropy)
    # gradients agree too
    (values.sum() + log_prob.sum()).backward()
    (ref_values.sum() + ref_log_prob.sum()).backward()
    for p, q in zip(policy.parameters(), plain.parameters(), strict=True):
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)


def test_id_mode_embeds_by_graph_id():
    env = _env(obs_mode="id")
    full = _env()
    torch.manual_seed(0)
    kwargs = dict(hidden=16)
    policy = GOPolicy(
        env.observation_space,
        env.action_space,
        lambda _: 1e-3,
        task=env.task,
        graphs=env.encoded_graphs(),
        **kwargs,
    )
    reference = GOPolicy(
        full.observation_space, full.action_space, lambda _: 1e-3, task=full.task, **kwargs
    )
    reference.load_state_dict(policy.state_dict())
    seen: list[int] = []
    policy.network.encoder.register_forward_hook(
        lambda m, args, out: seen.append(args[0].num_graphs)
    )
    ids = [1, 1, 0, 1]
    with torch.no_grad():
        values = policy.predict_values(
            {"graph_id": torch.tensor(ids, dtype=torch.float32)[:, None]}
        )
        ref = reference.predict_values(_batch(full, ids))
    assert seen == [2]
    torch.testing.assert_close(values, ref)
