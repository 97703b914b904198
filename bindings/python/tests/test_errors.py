"""Failures become exceptions of the status' class, carrying the status and the library's
message; misuse of closed or busy handles is refused; the model stays usable afterwards."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import specla
from specla import _capi

from conftest import PROMPT_IDS


def test_missing_folder_is_an_io_error(tmp_path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(specla.SpeclaIOError) as e:
        specla.Model.load(missing)
    assert e.value.status == _capi.SPECLA_ERR_IO
    assert str(missing) in e.value.message
    assert e.value.status_name.startswith("SPECLA_ERR_IO")
    assert isinstance(e.value, OSError) and isinstance(e.value, specla.SpeclaError)


def test_malformed_config_is_a_format_error(tmp_path) -> None:
    (tmp_path / "config.json").write_text("{ not json")
    with pytest.raises(specla.FormatError) as e:
        specla.Model.load(tmp_path)
    assert e.value.status == _capi.SPECLA_ERR_FORMAT and "config.json" in e.value.message


def test_unknown_backend_and_bad_threads(tmp_path) -> None:
    with pytest.raises(specla.InvalidArgumentError, match="backend"):
        specla.Model.load(tmp_path, backend="tpu")  # type: ignore[arg-type]
    from conftest import PYCODE
    with pytest.raises(specla.InvalidArgumentError) as e:
        specla.Model.load(PYCODE, threads=100000)
    assert "n_threads" in e.value.message and "256" in e.value.message


def test_bad_token_id_is_out_of_range(model, session) -> None:
    with pytest.raises(specla.TokenOutOfRangeError) as e:
        session.eval([1, 2, 99999])
    assert e.value.status == _capi.SPECLA_ERR_TOKEN_OUT_OF_RANGE
    assert "99999" in e.value.message
    assert session.n_past == 0  # nothing was evaluated
    with pytest.raises(specla.TokenOutOfRangeError):
        model.tokenizer.decode([-1])
    with pytest.raises(specla.InvalidArgumentError, match="int32"):
        session.eval([2 ** 40])
    # The session still computes what a fresh one does.
    with specla.Session(model) as fresh:
        np.testing.assert_array_equal(session.eval(PROMPT_IDS), fresh.eval(PROMPT_IDS))


def test_bad_sampling_parameters_name_the_field(session) -> None:
    for kwargs, field in ((dict(temperature=-1.0), "temperature"), (dict(top_p=2.0), "top_p"),
                          (dict(top_k=-3), "top_k"), (dict(temperature=float("nan")),
                                                      "temperature")):
        with pytest.raises(specla.InvalidArgumentError) as e:
            specla.generate(session, PROMPT_IDS, max_tokens=4, **kwargs)
        assert field in e.value.message, (kwargs, e.value.message)
    with pytest.raises(specla.InvalidArgumentError, match="max_tokens"):
        specla.generate(session, PROMPT_IDS, max_tokens=2 ** 31)
    with pytest.raises(specla.InvalidArgumentError, match="seed"):
        specla.generate(session, PROMPT_IDS, seed=-1)
    with pytest.raises(specla.InvalidArgumentError) as e:
        specla.generate(session, PROMPT_IDS, max_tokens=4, stop=[""])
    assert "stop string 0" in e.value.message
    assert session.n_past == 0


def test_empty_input_and_bad_shapes(session, model) -> None:
    with pytest.raises(specla.InvalidArgumentError):
        session.eval([])  # n_tokens must be >= 1
    with pytest.raises(specla.InvalidArgumentError, match="shape"):
        session.eval([1, 2], "all", out=np.empty((3, model.info.vocab_size), np.float32))
    with pytest.raises(specla.InvalidArgumentError, match="float32"):
        session.eval([1], out=np.empty(model.info.vocab_size, np.float64))
    with pytest.raises(specla.InvalidArgumentError, match="1-D"):
        session.eval(np.zeros((2, 2), np.int32))
    with pytest.raises(specla.InvalidArgumentError):
        session.get_state(layer=model.info.num_layers)


def test_drafter_errors(model, tmp_path) -> None:
    with pytest.raises(specla.SpeclaIOError) as e:
        specla.Drafter.eagle(model, tmp_path / "nothing")
    assert "nothing" in e.value.message
    with pytest.raises(specla.InvalidArgumentError) as e:
        specla.Drafter.prompt_lookup(model, min_ngram=5, max_ngram=2)
    assert "ngram" in e.value.message


def test_closed_handles_are_refused(model) -> None:
    s = specla.Session(model)
    s.close()
    s.close()  # twice is fine
    with pytest.raises(specla.StateError, match="session is closed"):
        s.n_past
    with pytest.raises(specla.StateError, match="closed"):
        specla.generate(s, [1], max_tokens=1)


def test_closing_the_model_first_keeps_its_sessions_working() -> None:
    from conftest import PYCODE
    m = specla.Model.load(PYCODE, threads=1)
    s = specla.Session(m)
    d = specla.Drafter.prompt_lookup(m)
    tok = m.tokenizer
    m.close()
    with pytest.raises(specla.StateError, match="model is closed"):
        specla.Session(m)
    r = specla.generate(s, "def f(x):", max_tokens=4, drafter=d)  # the library's model lives on
    assert len(r.tokens) == 4 and tok.decode(r.tokens) == r.text
    d.close()
    s.close()  # the last one: the library's model is freed now
    assert m._handle._ptr is None
    with pytest.raises(specla.StateError, match="freed"):
        tok.encode("x")  # it was the model's


def test_finalizers_free_without_close() -> None:
    import gc
    from conftest import PYCODE
    m = specla.Model.load(PYCODE, threads=1)
    s = specla.Session(m)
    handle = m._handle
    del m, s
    gc.collect()
    assert handle._ptr is None and handle.closed


def test_a_session_is_used_by_one_thread_at_a_time(session) -> None:
    s = specla.stream(session, [1, 2, 3], max_tokens=100, stop_at_eos=False)
    next(s)
    errors = []

    def other() -> None:
        try:
            session.eval([5])
        except specla.StateError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    s.close()
    assert len(errors) == 1 and "one thread at a time" in str(errors[0])


def test_text_prompt_needs_a_tokenizer() -> None:
    from conftest import PYCODE
    with specla.Model.load(PYCODE, threads=1, load_tokenizer=False) as m:
        assert m.info.has_tokenizer is False
        with pytest.raises(specla.StateError) as e:
            m.tokenizer
        assert e.value.status == _capi.SPECLA_ERR_STATE and "tokenizer" in e.value.message
        with specla.Session(m) as s:
            r = specla.generate(s, [1, 2, 3], max_tokens=3, stop_at_eos=False)
            assert len(r.tokens) == 3 and r.text == ""


def test_exception_hierarchy_covers_every_status() -> None:
    from specla.errors import error_for
    for status in range(1, 14):
        e = error_for(status, "msg")
        assert e.status == status and e.message == "msg"
        assert type(e) is not specla.SpeclaError
    unknown = error_for(99, "later")
    assert type(unknown) is specla.SpeclaError and unknown.status == 99


def test_a_failing_stream_raises_on_the_consumer_with_the_library_message(session) -> None:
    s = specla.stream(session, PROMPT_IDS, max_tokens=4, temperature=-1.0)
    with pytest.raises(specla.InvalidArgumentError) as e:
        next(s)  # the call ran on the stream's worker thread; its message comes across
    assert "temperature" in e.value.message
    session.reset()  # the session is free again
    assert session.n_past == 0
