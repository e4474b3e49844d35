"""policies.go_network: shapes per task, padding invariance, empty and tiny graphs."""

from __future__ import annotations

import pytest
import torch
from go_testing import encoded_obs, stack_obs

from policies.go_network import GONetwork, GOSettings

torch.set_num_threads(1)

JOINT = {"placement": 2, "scheduling": 8, "fusion": 2}


@pytest.mark.parametrize(
    "classes", [{"placement": 2}, {"scheduling": 8}, {"fusion": 2}, JOINT], ids=str
)
def test_shapes(classes):
    net = GONetwork(classes, hidden=16, segment_len=32, mem_len=32)
    obs = stack_obs([encoded_obs(extra_ops=5), encoded_obs(extra_ops=5)])
    logits, value, mask = net(obs)
    m = obs["op_features"].shape[1]
    assert list(logits) == list(classes)
    for name, k in classes.items():
        assert logits[name].shape == (2, m, k)
    assert value.shape == (2,) and mask.shape == (2, m)
    assert mask.sum(1).tolist() == [m - 5, m - 5]
    (value.sum() + sum(x.sum() for x in logits.values())).backward()


def test_joint_has_one_attention_head_per_task():
    net = GONetwork(JOINT, hidden=16)
    assert all(len(net.heads.attention[t].layers) == 1 for t in JOINT)
    assert len(GONetwork({"placement": 2}, hidden=16).heads.attention["placement"].layers) == 0


@pytest.mark.parametrize("classes", [{"placement": 2}, JOINT], ids=str)
def test_padding_changes_nothing(classes):
    torch.manual_seed(0)
    net = GONetwork(classes, hidden=32, segment_len=64, mem_len=64).eval()
    tight = encoded_obs()
    padded = encoded_obs(extra_ops=37, extra_edges=100)
    n = int(tight["counts"][0, 0])
    with torch.no_grad():
        a_logits, a_value, _ = net(tight)
        b_logits, b_value, b_mask = net(padded)
    for name in classes:
        torch.testing.assert_close(b_logits[name][:, :n], a_logits[name], atol=1e-5, rtol=1e-5)
        assert torch.all(b_logits[name][:, n:] == 0)
    torch.testing.assert_close(b_value, a_value, atol=1e-5, rtol=1e-5)
    assert not b_mask[0, n:].any()


def test_batch_of_different_sizes_equals_one_at_a_time():
    torch.manual_seed(0)
    net = GONetwork(JOINT, hidden=16, segment_len=32, mem_len=16).eval()
    m = 227 + 10
    a = encoded_obs("txl-tiny", extra_ops=10)
    b = encoded_obs("random-layered-100-s0", extra_ops=m - 100, extra_edges=200)
    b["edge_index"] = b["edge_index"][:, :, : a["edge_index"].shape[2]]  # same max_edges
    b["edge_features"] = b["edge_features"][:, : a["edge_features"].shape[1]]
    with torch.no_grad():
        both, v_both, _ = net(stack_obs([a, b]))
        only_b, v_b, _ = net(b)
    for name in JOINT:
        torch.testing.assert_close(both[name][1], only_b[name][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(v_both[1], v_b[0], atol=1e-5, rtol=1e-5)


def test_tiny_graph_in_many_slots_and_empty_graph_are_finite():
    net = GONetwork(JOINT, hidden=16, segment_len=64, mem_len=64)
    tiny = encoded_obs("txl-tiny", extra_ops=300)
    tiny["counts"][0] = torch.tensor([3, 2])  # keep 3 ops and their first 2 edges
    tiny["edge_index"][0, :, :2] = torch.tensor([[0, 1], [1, 2]])
    empty = {k: torch.zeros_like(v) for k, v in tiny.items()}  # the envs' terminal observation
    logits, value, mask = net(stack_obs([tiny, empty]))
    assert mask.sum(1).tolist() == [3, 0]
    assert all(torch.isfinite(x).all() for x in logits.values()) and torch.isfinite(value).all()
    (value.sum() + sum(x.sum() for x in logits.values())).backward()
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)
    logits, value, _ = net(empty)  # a batch of nothing but an empty graph
    assert torch.isfinite(value).all() and logits["placement"].shape == (1, 527, 2)


def test_dropout_and_no_film_variants_run():
    obs = encoded_obs()
    for kwargs in ({"dropout": 0.1}, {"film": False}, {"sage_layers": 0, "attn_layers": 0}):
        net = GONetwork(JOINT, hidden=16, segment_len=32, mem_len=32, **kwargs).train()
        logits, value, _ = net(obs)
        assert torch.isfinite(value).all() and logits["fusion"].shape[-1] == 2


@pytest.mark.parametrize("classes", [{"placement": 2}, JOINT], ids=str)
def test_a_device_agnostic_network_has_the_same_weights_for_any_device_count(classes):
    # Trained on 2 devices, its weights load into the network of 8 devices, where it scores
    # the 8 devices of an 8-device cluster's observation; with a hint, greedy is the hint.
    torch.manual_seed(0)
    net2 = GONetwork(classes, hidden=16, segment_len=32, mem_len=32, device_agnostic=True)
    net8 = GONetwork(
        {**classes, "placement": 8}, hidden=16, segment_len=32, mem_len=32, device_agnostic=True
    )
    shapes = {k: v.shape for k, v in net2.state_dict().items()}
    assert shapes == {k: v.shape for k, v in net8.state_dict().items()}
    net8.load_state_dict(net2.state_dict())
    obs = encoded_obs(cluster="v100-nvlink-8")
    m = obs["op_features"].shape[1]
    hint = torch.randint(0, 8, (1, m))
    blocks = [hint] + [torch.zeros(1, m, dtype=torch.long)] * (len(classes) - 1)
    logits, value, mask = net8({**obs, "hint": torch.cat(blocks, dim=1)})
    assert logits["placement"].shape == (1, m, 8) and torch.isfinite(value).all()
    assert torch.equal(logits["placement"][mask].argmax(-1), hint[mask])
    plain = GONetwork(classes, hidden=16, segment_len=32, mem_len=32)
    assert plain.heads.logits["placement"].out_features == 2  # the default: a map to D classes


def test_settings_given_whole_or_as_keywords_build_the_same_network():
    torch.manual_seed(0)
    whole = GONetwork(JOINT, GOSettings(hidden=16, segment_len=32, mem_len=32, film=False))
    torch.manual_seed(0)
    keywords = GONetwork(JOINT, hidden=16, segment_len=32, mem_len=32, film=False)
    assert whole.settings == keywords.settings and whole.film is None
    for a, b in zip(whole.state_dict().values(), keywords.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    replaced = GONetwork(JOINT, GOSettings(hidden=16), heads=2)  # a keyword replaces the field
    assert (replaced.settings.hidden, replaced.settings.heads) == (16, 2)


def test_the_settings_keep_the_names_of_policy_kwargs():
    assert GOSettings.names() == (
        "hidden",
        "sage_layers",
        "attn_layers",
        "head_layers",
        "heads",
        "segment_len",
        "mem_len",
        "ffn_mult",
        "dropout",
        "film",
        "hint_weight",
        "device_agnostic",
    )
    kwargs = {"hidden": 32, "film": False, "net_arch": [8]}
    assert GOSettings.pop_from(kwargs) == GOSettings(hidden=32, film=False)
    assert kwargs == {"net_arch": [8]}  # what is not a hyper-parameter stays
    assert GOSettings().to_kwargs()["segment_len"] == 128
