"""gdn_torch against flash-linear-attention's own outputs (tests/fixtures/gdn_tiny_{a,b}, fp32).

Tolerance: max |ours - fla| / max |fla| <= 2e-5 per tensor, the bound the C++ engine is held to
(seen here: <= 5e-6)."""
import pytest
import torch
from conftest import REPO
from safetensors.torch import load_file

from drafter.gdn_layer import rmsnorm
from drafter.gdn_torch import GDNModel

TOL = 2e-5
FIXTURES = ["gdn_tiny_a", "gdn_tiny_b"]


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.fixture(scope="module", params=FIXTURES)
def fixture(request):
    folder = REPO / "tests" / "fixtures" / request.param
    with torch.no_grad():
        yield GDNModel.from_folder(folder), load_file(str(folder / "expected.safetensors"))


@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
def test_prefill_logits_and_hidden(fixture, mode):
    model, exp = fixture
    ids = exp["input_ids"].long()[None]
    with torch.no_grad():
        out = model(ids, mode=mode, chunk=16)  # chunk 16: several chunks over the 40-token prompt
    assert rel_err(out.logits[0], exp["prefill_logits"]) <= TOL
    for i, h in enumerate(out.hidden):
        assert rel_err(h[0], exp[f"prefill_hidden_{i}"]) <= TOL, f"hidden {i}"
    final = rmsnorm(out.features[0], model.norm.weight, model.cfg.norm_eps)
    assert rel_err(final, exp[f"prefill_hidden_{len(out.hidden)}"]) <= TOL


def test_greedy_token_by_token(fixture):
    model, exp = fixture
    ids = exp["input_ids"].long()[None]
    want = exp["greedy_tokens"].long()
    with torch.no_grad():
        out = model(ids, mode="chunk")
        tokens = [int(out.logits[0, -1].argmax())]
        state = out.state
        for i in range(len(want) - 1):
            step = model(torch.tensor([[tokens[-1]]]), state=state, mode="recurrent")
            state = step.state
            assert rel_err(step.logits[0, 0], exp["greedy_step_logits"][i]) <= TOL, f"step {i}"
            tokens.append(int(step.logits[0, 0].argmax()))
    assert tokens == want.tolist()


@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
def test_chain_after_prompt_and_state(fixture, mode):
    model, exp = fixture
    with torch.no_grad():
        pre = model(exp["input_ids"].long()[None], mode=mode)
        out = model(exp["chain_tokens"].long()[None], state=pre.state, mode=mode)
    assert rel_err(out.logits[0], exp["chain_logits"]) <= TOL
    state = out.state[0].S[0].transpose(-1, -2)  # ours [HV, K, V], fla's [HV, V, K]
    assert rel_err(state, exp["state_layer0_recurrent"]) <= TOL


def test_chunk_form_equals_token_loop_on_long_input(fixture):
    model, _ = fixture
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.cfg.vocab_size, (2, 150), generator=g)
    with torch.no_grad():
        a = model(ids, mode="recurrent")
        b = model(ids, mode="chunk", chunk=32)
    assert rel_err(b.features, a.features) <= 1e-5
    assert rel_err(b.state[-1].S, a.state[-1].S) <= 1e-5
