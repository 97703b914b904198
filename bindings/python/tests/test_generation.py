"""generate() and stream() against the C API's own output (the specla CLI), plain and
speculative; stop strings; streaming pieces against the full text; cancellation."""
from __future__ import annotations

import threading

import pytest

import specla

from conftest import PROMPT_IDS, PROMPT_TEXT, PYCODE_EAGLE

SAMPLED = dict(temperature=1.0, top_k=50, top_p=0.95, seed=7)
SAMPLED_CLI = ("--temperature", "1", "--top-k", "50", "--top-p", "0.95", "--seed", "7")


def test_greedy_tokens_equal_the_c_api(session, cli) -> None:
    r = specla.generate(session, PROMPT_IDS, max_tokens=32, stop_at_eos=False)
    assert r.tokens == cli.tokens(PROMPT_IDS, "--max-tokens", "32", "--ignore-eos")
    assert len(r.tokens) == 32 and r.finish_reason == "length"
    assert r.prompt_tokens == len(PROMPT_IDS) and r.spec_stats is None
    assert session.n_past == len(PROMPT_IDS) + 32


def test_sampled_tokens_equal_the_c_api(session, cli) -> None:
    r = specla.generate(session, PROMPT_IDS, max_tokens=24, stop_at_eos=False, **SAMPLED)
    assert r.tokens == cli.tokens(PROMPT_IDS, "--max-tokens", "24", "--ignore-eos", *SAMPLED_CLI)
    session.reset()
    again = specla.generate(session, PROMPT_IDS, max_tokens=24, stop_at_eos=False, **SAMPLED)
    assert again.tokens == r.tokens


def test_text_equals_the_c_api(session, cli) -> None:
    r = specla.generate(session, PROMPT_TEXT, max_tokens=48)
    assert r.text == cli.text(PROMPT_TEXT, "--max-tokens", "48")
    # The library's text: special tokens (an EOS that ended it) left out.
    assert r.text == session.model.tokenizer.decode(r.tokens, skip_special=True)
    assert r.prompt_tokens == len(session.model.tokenizer.encode(PROMPT_TEXT))


@pytest.mark.parametrize("kind", ["prompt_lookup", "eagle"])
def test_speculative_equals_the_c_api_and_plain(model, session, cli, kind) -> None:
    drafter = (specla.Drafter.prompt_lookup(model) if kind == "prompt_lookup"
               else specla.Drafter.eagle(model, PYCODE_EAGLE))
    with drafter:
        r = specla.generate(session, PROMPT_TEXT, max_tokens=48, drafter=drafter)
    extra = ("--speculative",) if kind == "prompt_lookup" else ("--drafter", str(PYCODE_EAGLE))
    assert r.text == cli.text(PROMPT_TEXT, "--max-tokens", "48", *extra)
    with specla.Session(model) as plain:
        assert r.tokens == specla.generate(plain, PROMPT_TEXT, max_tokens=48).tokens
    assert r.spec_stats is not None and r.spec_stats.generated == len(r.tokens)
    assert r.spec_stats.steps < len(r.tokens)  # some drafts were accepted


def test_spec_options_reach_the_library(model, session) -> None:
    with specla.Drafter.prompt_lookup(model, max_draft_len=2) as d:
        r = specla.generate(session, "a = 1\nb = 2\na = 1\nb = 2\na = 1\n", max_tokens=32,
                            drafter=d, spec=specla.SpecOptions(max_draft_nodes=1,
                                                               max_draft_depth=1))
    st = r.spec_stats
    assert st is not None and st.drafted <= st.steps  # at most one node per pass
    assert len(st.drafted_at_depth) <= 1


def test_stop_strings(session, cli) -> None:
    base = specla.generate(session, PROMPT_TEXT, max_tokens=48)
    stop = base.text[10:14]
    session.reset()
    r = specla.generate(session, PROMPT_TEXT, max_tokens=48, stop=["never seen", stop])
    assert (r.finish_reason, r.stop_index) == ("stop", 1)
    assert r.text == base.text[:10]  # ends where the stop string begins
    assert len(r.tokens) < len(base.tokens)
    assert r.text == cli.text(PROMPT_TEXT, "--max-tokens", "48", "--stop", stop)
    session.reset()
    kept = specla.generate(session, PROMPT_TEXT, max_tokens=48, stop=[stop],
                           include_stop_string=True)
    assert kept.text == base.text[:14] and kept.tokens == r.tokens


def _check_stream(session, **kwargs) -> None:
    full = specla.generate(session, PROMPT_TEXT, max_tokens=40, **kwargs)
    session.reset()
    s = specla.stream(session, PROMPT_TEXT, max_tokens=40, **kwargs)
    pieces = list(s)
    assert len(pieces) > 5 and all(pieces)
    assert "".join(pieces) == full.text
    assert s.result is not None
    assert s.result.tokens == full.tokens and s.result.text == full.text
    assert s.result.finish_reason == full.finish_reason
    if "drafter" in kwargs:  # (the counts themselves may differ: EAGLE sizes trees by timing)
        assert s.result.spec_stats is not None
        assert s.result.spec_stats.generated == len(full.tokens)


def test_stream_concatenates_to_the_full_text_plain(session) -> None:
    _check_stream(session)
    session.reset()
    _check_stream(session, **SAMPLED)


def test_stream_concatenates_to_the_full_text_speculative(model, session) -> None:
    with specla.Drafter.prompt_lookup(model) as d:
        _check_stream(session, drafter=d)
    session.reset()
    with specla.Drafter.eagle(model, PYCODE_EAGLE) as d:
        _check_stream(session, drafter=d)


def test_stream_close_cancels(session) -> None:
    s = specla.stream(session, PROMPT_TEXT, max_tokens=200, stop_at_eos=False)
    got = [next(s) for _ in range(3)]
    assert all(got)
    s.close()
    # The worker has stopped and the session is free: it runs at most one token ahead.
    n_prompt = len(session.model.tokenizer.encode(PROMPT_TEXT))
    assert n_prompt + 3 <= session.n_past <= n_prompt + 5
    assert s.result is not None and s.result.finish_reason == "aborted"
    with pytest.raises(StopIteration):
        next(s)
    # The session goes on from where the stream stopped.
    specla.generate(session, max_tokens=2, stop_at_eos=False)


def test_stream_break_out_of_a_with_block_frees_the_session(session) -> None:
    with specla.stream(session, PROMPT_TEXT, max_tokens=200, stop_at_eos=False) as s:
        for i, _piece in enumerate(s):
            if i == 2:
                break
    assert session.n_past < 30  # stopped long before the budget
    session.reset()


def test_stream_cancel_event_from_another_thread(model, session) -> None:
    cancel = threading.Event()
    with specla.Drafter.prompt_lookup(model) as d:
        s = specla.stream(session, PROMPT_TEXT, max_tokens=400, stop_at_eos=False, drafter=d,
                          cancel=cancel)
        pieces = []
        for piece in s:
            pieces.append(piece)
            if len(pieces) == 4:
                threading.Thread(target=cancel.set).start()
        assert s.result is not None and s.result.finish_reason == "aborted"
        assert 4 <= len(s.result.tokens) < 400
        assert "".join(pieces) == s.result.text
        assert s.result.text == model.tokenizer.decode(s.result.tokens)


def test_cancel_set_before_the_stream_starts(session) -> None:
    cancel = threading.Event()
    cancel.set()
    s = specla.stream(session, PROMPT_TEXT, max_tokens=10, cancel=cancel)
    assert list(s) == []
    assert s.result is not None and s.result.finish_reason == "aborted"
    assert session.n_past == 0


def test_open_stream_makes_the_session_busy(session) -> None:
    s = specla.stream(session, PROMPT_TEXT, max_tokens=50, stop_at_eos=False)
    next(s)
    with pytest.raises(specla.StateError, match="in use"):
        session.reset()
    with pytest.raises(specla.StateError, match="in use"):
        specla.generate(session, [1], max_tokens=1)
    s.close()
    session.reset()


def test_a_dropped_stream_frees_the_session(session) -> None:
    import gc
    s = specla.stream(session, PROMPT_TEXT, max_tokens=200, stop_at_eos=False)
    next(s)
    del s
    gc.collect()
    session.reset()  # not busy any more
    assert session.n_past == 0
