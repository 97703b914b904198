"""Session state and evaluation, the tokenizer from a model and from a folder."""
from __future__ import annotations

import numpy as np

import specla

from conftest import PROMPT_IDS, PROMPT_TEXT, PYCODE


def test_eval_modes_and_in_place_output(model, session) -> None:
    vocab = model.info.vocab_size
    all_rows = session.eval(PROMPT_IDS, "all")
    assert all_rows.shape == (len(PROMPT_IDS), vocab) and all_rows.dtype == np.float32
    assert session.n_past == len(PROMPT_IDS)
    session.reset()
    assert session.n_past == 0
    assert session.eval(PROMPT_IDS[:-1], "none") is None
    out = np.empty(vocab, dtype=np.float32)
    got = session.eval(np.array(PROMPT_IDS[-1:], dtype=np.int64), out=out)
    assert got is out
    np.testing.assert_allclose(out, all_rows[-1], rtol=0, atol=1e-5 * np.abs(all_rows).max())


def test_greedy_generation_is_the_argmax_chain(model, session) -> None:
    r = specla.generate(session, PROMPT_IDS, max_tokens=6, stop_at_eos=False)
    with specla.Session(model) as s:
        row = s.eval(PROMPT_IDS)
        for t in r.tokens:
            assert int(np.argmax(row)) == t
            row = s.eval([t])


def test_get_state(model, session) -> None:
    info = model.info
    zero = session.get_state(0)
    assert zero.shape == (info.num_v_heads, info.head_v_dim, info.head_k_dim)
    assert not zero.any()
    session.eval(PROMPT_IDS, "none")
    all_layers = session.get_state()
    assert all_layers.shape == (info.num_layers,) + zero.shape
    assert all_layers[3].any()
    np.testing.assert_array_equal(all_layers[3], session.get_state(3))
    # Recurrent state + conv cache = state_bytes; the recurrent part is what get_state returns.
    assert all_layers.nbytes < info.state_bytes


def test_continuing_with_an_empty_prompt(model, session) -> None:
    first = specla.generate(session, PROMPT_IDS, max_tokens=5, stop_at_eos=False)
    more = specla.generate(session, max_tokens=3, stop_at_eos=False)
    with specla.Session(model) as s:
        longer = specla.generate(s, PROMPT_IDS, max_tokens=8, stop_at_eos=False)
    assert first.tokens + more.tokens == longer.tokens


def test_tokenizer_round_trip_and_folder_copy(model) -> None:
    tok = model.tokenizer
    ids = tok.encode(PROMPT_TEXT)
    assert all(isinstance(i, int) for i in ids)
    assert tok.decode(ids) == PROMPT_TEXT
    with specla.Tokenizer.load(PYCODE) as own:
        assert own.encode(PROMPT_TEXT) == ids
        assert own.info == tok.info
    assert tok.encode("x", add_bos=True)[0] == tok.info.bos_token_id
    piece = tok.token_to_piece(ids[1])
    assert tok.piece_to_token(piece) == ids[1]
    text = "é ü 汉字 — " * 3
    with tok.stream_decoder() as dec:
        pieces = [dec.push(t) for t in tok.encode(text, add_bos=False)] + [dec.flush()]
    assert "".join(pieces) == text


def test_sessions_on_threads_run_at_once(model) -> None:
    import threading
    results = {}

    def work(i: int) -> None:
        with specla.Session(model) as s:
            results[i] = specla.generate(s, PROMPT_IDS, max_tokens=8, stop_at_eos=False).tokens

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0] == results[1] == results[2] and len(results[0]) == 8
