"""Generation over the pull API: finish reasons and stop index from the library, EOS text and
stop strings left out of the (streamed) text unless asked for, and cancellation from another
thread that ends a long prompt's feeding or a long generation quickly, leaving the session
usable."""
from __future__ import annotations

import threading
import time

import pytest

import specla

from conftest import PROMPT_TEXT

# The model finishes this main guard, then the file (tests/api/test_generation_pull.cpp).
EOS_PROMPT = "if __name__ == '__main__':\n    unittest.main("
EOS_TEXT = "<|endoftext|>"
# A few thousand tokens: seconds of prefill on one thread, fed in blocks with an abort check.
LONG_PROMPT = "def f(x):\n    return x + 1\n" * 200
# What an abort may take: the library answers within one prompt block or one step (8 tokens or
# one token here, milliseconds); this bounds it with a loaded shared CI machine in mind.
QUICK_S = 0.5


@pytest.mark.parametrize("speculative", [False, True])
def test_finish_reason_eos_and_its_text(model, session, speculative) -> None:
    with specla.Drafter.prompt_lookup(model) as d:
        drafter = d if speculative else None
        r = specla.generate(session, EOS_PROMPT, max_tokens=64, drafter=drafter)
        assert (r.finish_reason, r.stop_index) == ("eos", -1)
        assert r.tokens[-1] == model.info.eos_token_id and len(r.tokens) < 64
        assert EOS_TEXT not in r.text and r.text.endswith("unittest.main()\n")
        session.reset()
        pieces = list(specla.stream(session, EOS_PROMPT, max_tokens=64, drafter=drafter))
        assert "".join(pieces) == r.text and all(EOS_TEXT not in p for p in pieces)
        session.reset()
        kept = specla.generate(session, EOS_PROMPT, max_tokens=64, drafter=drafter,
                               include_special_tokens=True)
        assert kept.text == r.text + EOS_TEXT and kept.tokens == r.tokens
        session.reset()
        # Without the EOS stop the budget ends it.
        more = specla.generate(session, EOS_PROMPT, max_tokens=len(r.tokens) + 3,
                               stop_at_eos=False, drafter=drafter)
        assert more.finish_reason == "length" and len(more.tokens) == len(r.tokens) + 3


def test_finish_reason_length(session) -> None:
    r = specla.generate(session, PROMPT_TEXT, max_tokens=5, stop_at_eos=False)
    assert (r.finish_reason, r.stop_index, len(r.tokens)) == ("length", -1, 5)


@pytest.mark.parametrize("speculative", [False, True])
def test_stop_string_is_not_in_the_streamed_text(model, session, speculative) -> None:
    base = specla.generate(session, PROMPT_TEXT, max_tokens=48).text
    stop = base[20:25]
    assert stop not in base[:20]
    with specla.Drafter.prompt_lookup(model) as d:
        drafter = d if speculative else None
        session.reset()
        s = specla.stream(session, PROMPT_TEXT, max_tokens=48, stop=["zzz", stop],
                          drafter=drafter)
        pieces = list(s)
        assert "".join(pieces) == base[:20]  # nothing of the stop string was streamed
        assert s.result is not None
        assert (s.result.finish_reason, s.result.stop_index) == ("stop", 1)
        assert s.result.text == base[:20]
        session.reset()
        s = specla.stream(session, PROMPT_TEXT, max_tokens=48, stop=[stop], drafter=drafter,
                          include_stop_string=True)
        assert "".join(s) == base[:25]


def _cancel_later(event: threading.Event, delay: float) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(delay), event.set()))
    t.start()
    return t


def test_cancel_event_ends_a_long_prefill_quickly(model, session) -> None:
    ids = model.tokenizer.encode(LONG_PROMPT)
    cancel = threading.Event()
    setter = _cancel_later(cancel, 0.3)
    start = time.monotonic()
    r = specla.generate(session, ids, max_tokens=8, cancel=cancel)
    elapsed = time.monotonic() - start
    setter.join()
    assert r.finish_reason == "aborted" and r.tokens == [] and r.text == ""
    assert elapsed < 0.3 + QUICK_S, elapsed
    # The session holds the blocks fed before the abort, and goes on from there.
    assert 0 < session.n_past < len(ids)
    n = session.n_past
    assert specla.generate(session, ids[n:n + 8], max_tokens=2, stop_at_eos=False).tokens
    session.reset()
    assert len(specla.generate(session, "x = 1", max_tokens=3, stop_at_eos=False).tokens) == 3


@pytest.mark.parametrize("speculative", [False, True])
def test_cancel_event_ends_a_generation_quickly(model, session, speculative) -> None:
    cancel = threading.Event()
    with specla.Drafter.prompt_lookup(model) as d:
        s = specla.stream(session, PROMPT_TEXT, max_tokens=100000, stop_at_eos=False,
                          drafter=d if speculative else None, cancel=cancel)
        pieces = [next(s)]
        setter = _cancel_later(cancel, 0.3)
        start = time.monotonic()
        pieces += list(s)
        elapsed = time.monotonic() - start
        setter.join()
        assert s.result is not None and s.result.finish_reason == "aborted"
        assert elapsed < 0.3 + QUICK_S, elapsed
        assert "".join(pieces) == s.result.text
        n_prompt = len(model.tokenizer.encode(PROMPT_TEXT))
        assert 1 <= len(s.result.tokens) < 100000
        # The session holds the prompt and every token returned (the last one still to feed).
        assert session.n_past in (n_prompt + len(s.result.tokens) - 1,
                                  n_prompt + len(s.result.tokens))
        # Free again, and it continues.
        assert len(specla.generate(session, max_tokens=2, stop_at_eos=False,
                                   drafter=d if speculative else None).tokens) == 2


def test_abort_from_another_thread_during_a_blocking_step(model, session) -> None:
    ids = model.tokenizer.encode(LONG_PROMPT)
    s = specla.stream(session, ids, max_tokens=8)
    timer = threading.Timer(0.3, s.abort)
    timer.start()
    start = time.monotonic()
    assert list(s) == []  # the first step feeds the prompt; aborted inside it
    timer.join()
    assert time.monotonic() - start < 0.3 + QUICK_S
    assert s.result is not None and s.result.finish_reason == "aborted"
    session.reset()  # free


def test_generate_cancelled_before_it_begins(session) -> None:
    cancel = threading.Event()
    cancel.set()
    r = specla.generate(session, PROMPT_TEXT, max_tokens=10, cancel=cancel)
    assert (r.finish_reason, r.tokens, session.n_past) == ("aborted", [], 0)


def test_keyboard_interrupt_aborts_and_frees_the_session(session) -> None:
    s = specla.stream(session, PROMPT_TEXT, max_tokens=200, stop_at_eos=False)
    next(s)
    with pytest.raises(KeyboardInterrupt):
        s.throw(KeyboardInterrupt)
    assert s.result is not None and s.result.finish_reason == "aborted"
    specla.generate(session, max_tokens=1)  # not busy


def test_a_failing_begin_frees_the_session(session) -> None:
    with pytest.raises(specla.TokenOutOfRangeError) as e:
        specla.generate(session, [1, 10 ** 6], max_tokens=2)
    assert "1000000" in e.value.message
    assert len(specla.generate(session, [1, 2], max_tokens=2, stop_at_eos=False).tokens) == 2
