"""verify_tree over NumPy arrays: a greedy chain is accepted whole, its bonus token is the next
greedy token, and the node logits equal session.eval's for the same path."""
from __future__ import annotations

import numpy as np
import pytest

import specla

from conftest import PROMPT_IDS


def _greedy_chain(model, n):
    with specla.Session(model) as s:
        return specla.generate(s, PROMPT_IDS, max_tokens=n, stop_at_eos=False).tokens


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def test_greedy_chain_round_trip(model, session) -> None:
    chain = _greedy_chain(model, 6)
    draft, bonus_want = chain[:5], chain[5]
    vocab = model.info.vocab_size
    session.eval(PROMPT_IDS)  # the candidates follow the context
    tokens = np.array(draft, dtype=np.int32)
    parents = np.arange(-1, len(draft) - 1, dtype=np.int32)
    out = np.full((len(draft), vocab), np.nan, dtype=np.float32)
    r = specla.verify_tree(session, tokens, parents, out_logits=out)
    assert r.logits is out  # written in place, no copy
    assert r.accepted.dtype == np.int32
    np.testing.assert_array_equal(r.accepted, np.arange(len(draft)))
    assert r.bonus_token == bonus_want
    # Row i is the target's logits after node i: its argmax is the next greedy token.
    assert list(np.argmax(r.logits, axis=1)) == chain[1:6]
    # The context: prompt + accepted + the pending bonus token.
    assert session.n_past == len(PROMPT_IDS) + len(draft) + 1

    with specla.Session(model) as ref:
        want = ref.eval(PROMPT_IDS + draft, "all")[len(PROMPT_IDS):]
        assert _rel_err(r.logits, want) <= 2e-5
        # The committed state equals plain decoding of the same tokens.
        ref.eval([bonus_want], "none")
        assert _rel_err(session.get_state(), ref.get_state()) <= 2e-5


def test_a_wrong_token_ends_the_accepted_path(model, session) -> None:
    chain = _greedy_chain(model, 4)
    session.eval(PROMPT_IDS, "none")
    wrong = (chain[2] + 1) % model.info.vocab_size
    r = session.verify_tree([chain[0], chain[1], wrong, chain[3]], [-1, 0, 1, 2],
                            want_logits=False)
    assert r.logits is None
    assert r.accepted.tolist() == [0, 1]
    assert r.bonus_token == chain[2]  # the target's own token where the draft went wrong


def test_tree_with_siblings(model, session) -> None:
    chain = _greedy_chain(model, 3)
    vocab = model.info.vocab_size
    session.eval(PROMPT_IDS, "none")
    # Two root candidates (a wrong one first), the right one continued by the next greedy token.
    tokens = [(chain[0] + 7) % vocab, chain[0], chain[1]]
    r = specla.verify_tree(session, tokens, [-1, -1, 1])
    assert r.accepted.tolist() == [1, 2]
    assert r.bonus_token == chain[2]
    assert r.logits.shape == (3, vocab)
    assert int(np.argmax(r.logits[1])) == chain[1]
    with specla.Session(model) as ref:
        want = ref.eval(PROMPT_IDS + [tokens[0]], "last")
        assert _rel_err(r.logits[0], want) <= 2e-5  # the wrong sibling's own path


def test_draft_dists_and_sampling(model, session) -> None:
    vocab = model.info.vocab_size
    session.eval(PROMPT_IDS, "none")
    dists = np.full((2, vocab), 1.0 / vocab, dtype=np.float32)
    r = specla.verify_tree(session, [5, 6], [-1, 0], draft_dists=dists, temperature=1.0,
                           seed=3)
    assert len(r.accepted) <= 2 and 0 <= r.bonus_token < vocab
    with pytest.raises(specla.InvalidArgumentError, match="draft_dists"):
        specla.verify_tree(session, [1], [-1], draft_dists=dists)


def test_empty_tree_decodes_one_token(model, session) -> None:
    chain = _greedy_chain(model, 1)
    session.eval(PROMPT_IDS, "none")
    r = specla.verify_tree(session, [], [])
    assert r.accepted.size == 0 and r.bonus_token == chain[0]
    assert r.logits is not None and r.logits.shape == (0, model.info.vocab_size)


def test_bad_trees_are_refused(model, session) -> None:
    session.eval(PROMPT_IDS, "none")
    with pytest.raises(specla.InvalidArgumentError) as e:
        specla.verify_tree(session, [1, 2], [-1, 1])  # a parent must come before its child
    assert "parent" in e.value.message
    with pytest.raises(specla.TokenOutOfRangeError):
        specla.verify_tree(session, [1, model.info.vocab_size], [-1, 0])
    with pytest.raises(specla.InvalidArgumentError, match="parents"):
        specla.verify_tree(session, [1, 2], [-1])
    n = session.max_tree_nodes + 1
    with pytest.raises(specla.InvalidArgumentError) as e:
        specla.verify_tree(session, [1] * n, list(range(-1, n - 1)))
    assert "max_tree_nodes" in e.value.message
    assert session.n_past == len(PROMPT_IDS)  # nothing changed


@pytest.mark.parametrize("algorithm", ["auto", "hybrid", "parallel_wy"])
def test_every_tree_algorithm_accepts_the_greedy_chain(model, algorithm) -> None:
    chain = _greedy_chain(model, 5)
    with specla.Session(model) as s:
        s.eval(PROMPT_IDS)
        r = specla.verify_tree(s, chain[:4], [-1, 0, 1, 2], tree_algorithm=algorithm)
    np.testing.assert_array_equal(r.accepted, np.arange(4))
    assert r.bonus_token == chain[4]


def test_an_unknown_tree_algorithm_is_refused(session) -> None:
    with pytest.raises(specla.InvalidArgumentError, match="tree_algorithm"):
        specla.verify_tree(session, [1], [-1], tree_algorithm="fastest")
