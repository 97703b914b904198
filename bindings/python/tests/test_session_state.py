"""Session state through the package: save -> load -> continue and fork give what an
uninterrupted run gives; refused states raise the status's exception with the library's message
and leave the session usable; the memory query adds up."""
from __future__ import annotations

import pytest

import specla

from conftest import FIXTURES, PROMPT_IDS

GREEDY = dict(max_tokens=24, stop_at_eos=False)
SAMPLED = dict(max_tokens=24, stop_at_eos=False, temperature=1.0, top_k=50, seed=11)


def _reference(model, **kwargs):  # type: ignore[no-untyped-def]
    """(first half, second half) of one uninterrupted run of two generate calls."""
    with specla.Session(model) as s:
        first = specla.generate(s, PROMPT_IDS, **kwargs).tokens
        return first, specla.generate(s, **kwargs).tokens


@pytest.mark.parametrize("kwargs", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_save_load_continue_equals_an_uninterrupted_run(model, session, kwargs) -> None:
    first, second = _reference(model, **kwargs)
    assert specla.generate(session, PROMPT_IDS, **kwargs).tokens == first
    state = session.save_state()
    assert isinstance(state, bytes) and len(state) > model.info.state_bytes
    n_past = session.n_past
    # Into a fresh session, from bytes and from a writable buffer.
    for data in (state, bytearray(state), memoryview(bytearray(state))):
        with specla.Session(model) as other:
            other.load_state(data)
            assert other.n_past == n_past
            assert specla.generate(other, **kwargs).tokens == second
    # Back into the same session after it moved on.
    specla.generate(session, [5, 6, 7], max_tokens=3)
    session.load_state(state)
    assert specla.generate(session, **kwargs).tokens == second


def test_state_file_round_trip(model, session, tmp_path) -> None:
    first, second = _reference(model, **GREEDY)
    specla.generate(session, PROMPT_IDS, **GREEDY)
    path = tmp_path / "s.state"
    session.save_state_file(path)
    assert path.read_bytes() == session.save_state()
    with specla.Session(model) as other:
        other.load_state_file(str(path))
        assert specla.generate(other, **GREEDY).tokens == second
    missing = tmp_path / "missing.state"
    with pytest.raises(specla.SpeclaIOError) as e:
        session.load_state_file(missing)
    assert str(missing) in e.value.message


def test_fork_continues_equally(model, session) -> None:
    first, second = _reference(model, **GREEDY)
    specla.generate(session, PROMPT_IDS, **GREEDY)
    with session.fork() as child:
        assert child.n_past == session.n_past and child.model is model
        assert specla.generate(child, **GREEDY).tokens == second
        assert specla.generate(session, **GREEDY).tokens == second  # the parent is unchanged
        # Both go on independently (and equally, being greedy).
        assert specla.generate(child, [3, 4], **GREEDY).tokens == \
            specla.generate(session, [3, 4], **GREEDY).tokens


def test_fork_of_a_speculative_session_continues_equally(model, session) -> None:
    prompt = "a = [1, 2, 3]\nb = [1, 2, 3]\nc = [1,"
    with specla.Session(model) as plain:
        specla.generate(plain, prompt, **GREEDY)
        want = specla.generate(plain, **GREEDY).tokens
    with specla.Drafter.prompt_lookup(model) as d:
        specla.generate(session, prompt, drafter=d, **GREEDY)
        child = session.fork()
    with child, specla.Drafter.prompt_lookup(model) as d2:
        assert specla.generate(child, drafter=d2, **GREEDY).tokens == want


def _refused(session, data, error, text) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as e:
        session.load_state(data)
    assert text in e.value.message, e.value.message
    assert e.value.status == error.status


def test_corrupted_and_truncated_states_are_refused(model, session) -> None:
    first, second = _reference(model, **GREEDY)
    specla.generate(session, PROMPT_IDS, **GREEDY)
    state = session.save_state()
    with specla.Session(model) as target:
        specla.generate(target, [1, 2, 3], max_tokens=3)
        twin_n_past = target.n_past
        _refused(target, b"", specla.FormatError, "truncated")
        _refused(target, state[:50], specla.FormatError, "truncated")
        _refused(target, state[:-1], specla.FormatError, "truncated: the header announces")
        _refused(target, state + b"\0", specla.FormatError, "after the end of the state")
        _refused(target, b"X" + state[1:], specla.FormatError, "not a SpecLA session state")
        bad = bytearray(state)
        bad[len(bad) // 2] ^= 1
        _refused(target, bad, specla.FormatError, "checksum mismatch")
        future = bytearray(state)
        future[8] = 2
        _refused(target, future, specla.UnsupportedError, "format version 2")
        # Nothing changed, and the good state still loads.
        assert target.n_past == twin_n_past
        target.load_state(state)
        assert specla.generate(target, **GREEDY).tokens == second


def test_a_state_of_another_model_is_a_shape_error(model, session) -> None:
    specla.generate(session, PROMPT_IDS, max_tokens=2)
    state = session.save_state()
    with specla.Model.load(FIXTURES / "gdn_tiny_a") as tiny, specla.Session(tiny) as other:
        _refused(other, state, specla.ShapeError, "this session's model has")
        with pytest.raises(specla.ShapeError, match="another model"):
            other.copy_state_from(session)


def test_state_calls_refused_while_a_stream_is_open(session) -> None:
    s = specla.stream(session, PROMPT_IDS, max_tokens=50, stop_at_eos=False)
    next(s)
    for call in (session.save_state, session.fork, session.memory):
        with pytest.raises(specla.StateError, match="in use"):
            call()
    s.close()
    session.save_state()


def test_memory_adds_up(model, session) -> None:
    m = session.memory()
    assert isinstance(m, specla.SessionMemory)
    assert m.state_bytes == model.info.state_bytes
    assert m.state_bytes + m.factor_bytes + m.scratch_bytes + m.context_bytes == m.total_bytes
    assert m.host_bytes + m.device_bytes == m.total_bytes
    assert m.device_bytes == 0 and m.factor_bytes > 0 and m.scratch_bytes > 0
    with specla.Session(model, max_tree_nodes=8) as small:
        assert small.memory().factor_bytes < m.factor_bytes  # sized by max_tree_nodes
