"""make_fixture reproduces the committed tests/fixtures/eagle_tiny_a: same config, same weights
(bit for bit: they come straight from the seeded generator), same ids, and the same expected
floats up to 1e-6 of each tensor's scale (other BLAS builds may round the last bits differently)."""
import json

import torch
from conftest import REPO
from safetensors.torch import load_file

from drafter.make_fixture import make

COMMITTED = REPO / "tests" / "fixtures" / "eagle_tiny_a"


def test_make_fixture_reproduces_committed(tmp_path):
    expected = make(REPO / "tests" / "fixtures" / "gdn_tiny_a", tmp_path)
    assert json.loads((tmp_path / "config.json").read_text()) == json.loads((COMMITTED / "config.json").read_text())
    ours, theirs = load_file(str(tmp_path / "model.safetensors")), load_file(str(COMMITTED / "model.safetensors"))
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert torch.equal(ours[k], theirs[k]), k
    committed = load_file(str(COMMITTED / "expected.safetensors"))
    assert expected.keys() == committed.keys()
    for k, v in committed.items():
        if v.dtype == torch.int32:
            assert torch.equal(expected[k], v), k
        else:
            # fp32 recomputed on another CPU: PyTorch's kernels pick their vector width (and
            # with it the summation order) by the CPU (1.02e-6 measured on an AMD EPYC)
            assert float((expected[k] - v).abs().max() / v.abs().max()) <= 1e-5, k


def test_fixture_layout_is_the_documented_one():
    e = load_file(str(COMMITTED / "expected.safetensors"))
    s, d, vocab = e["target.tokens"].shape[0], 128, 512
    n = e["tree.tokens"].shape[0]
    shapes = {"target.tokens": [s], "target.features": [s, d], "chain.tokens": [s - 1],
              "chain.features_in": [s - 1, d], "chain.features_out": [s - 1, d], "chain.logits": [s - 1, vocab],
              "tree.tokens": [n], "tree.parents": [n], "tree.features_in": [n, d],
              "tree.features_out": [n, d], "tree.logits": [n, vocab]}
    assert {k: list(v.shape) for k, v in e.items()} == shapes
    assert torch.equal(e["chain.tokens"], e["target.tokens"][1:])
    assert torch.equal(e["chain.features_in"], e["target.features"][:-1])
    parents = e["tree.parents"].tolist()
    assert all(p < v for v, p in enumerate(parents)) and parents.count(-1) >= 2
    depth = [0] * n
    for v, p in enumerate(parents):
        depth[v] = 1 if p < 0 else depth[p] + 1
    assert max(depth) >= 3
    for v, p in enumerate(parents):  # a node's input is its parent's output (the chain's for level 1)
        src = e["chain.features_out"][-1] if p < 0 else e["tree.features_out"][p]
        assert torch.equal(e["tree.features_in"][v], src)
    for k in ("target.features", "chain.features_out", "chain.logits", "tree.logits"):
        assert e[k].dtype == torch.float32


def test_chunk_form_agrees_with_fixture():
    """The drafter's parallel chain (chunk form) vs the fixture's token-loop chain."""
    from drafter.eagle import EagleDrafter
    from drafter.gdn_torch import GDNModel

    e = load_file(str(COMMITTED / "expected.safetensors"))
    target = GDNModel.from_folder(REPO / "tests" / "fixtures" / "gdn_tiny_a")
    drafter = EagleDrafter.from_folder(COMMITTED, target)
    with torch.no_grad():
        out, _ = drafter.chain(e["chain.tokens"].long()[None], e["chain.features_in"][None], chunk=8)
    for got, k in ((out.features[0], "chain.features_out"), (out.logits[0], "chain.logits")):
        assert float((got - e[k]).abs().max() / e[k].abs().max()) <= 1e-5, k
