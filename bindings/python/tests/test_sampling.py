"""generate() and stream()'s sampling options beyond temperature/top-k/top-p: min-p, the
repetition, presence and frequency penalties and the logit bias reach the library (checked
against the C API's own output, the specla CLI) and bad values are the library's errors."""
from __future__ import annotations

import gc

import pytest

import specla
from specla import _capi
from specla._params import DEFAULT_PENALTY_LAST_N, DEFAULT_REPETITION_PENALTY

from conftest import PROMPT_IDS

# Greedy decoding of this prompt repeats it; penalties must steer it elsewhere.
REPETITIVE = "a = 1\nb = 2\na = 1\nb = 2\na = 1\nb = 2\na = 1\n"
FORCED = 1234  # an arbitrary in-vocabulary id


def test_python_defaults_are_the_librarys() -> None:
    sa = _capi.default_params(_capi.specla_sampling_params)
    assert (sa.repetition_penalty, sa.penalty_last_n) == (DEFAULT_REPETITION_PENALTY,
                                                          DEFAULT_PENALTY_LAST_N)
    assert (sa.presence_penalty, sa.frequency_penalty, sa.min_p) == (0.0, 0.0, 0.0)


def test_a_large_logit_bias_forces_the_token_in_greedy_output(session) -> None:
    plain = specla.generate(session, PROMPT_IDS, max_tokens=6, stop_at_eos=False)
    assert FORCED not in plain.tokens
    session.reset()
    r = specla.generate(session, PROMPT_IDS, max_tokens=6, stop_at_eos=False,
                        logit_bias={FORCED: 100.0})
    assert r.tokens == [FORCED] * 6


def test_a_negative_logit_bias_bans_the_greedy_token(session) -> None:
    plain = specla.generate(session, PROMPT_IDS, max_tokens=8, stop_at_eos=False)
    session.reset()
    banned = specla.generate(session, PROMPT_IDS, max_tokens=8, stop_at_eos=False,
                             logit_bias={plain.tokens[0]: -100.0})
    assert banned.tokens[0] != plain.tokens[0]
    assert plain.tokens[0] not in banned.tokens


def test_the_streamed_logit_bias_lives_with_the_stream(session) -> None:
    # The library copies the entries when generation begins, at the first next(): the array
    # must outlive the call that built it.
    s = specla.stream(session, PROMPT_IDS, max_tokens=4, stop_at_eos=False,
                      logit_bias={FORCED: 100.0})
    gc.collect()
    list(s)
    assert s.result is not None and s.result.tokens == [FORCED] * 4


@pytest.mark.parametrize("penalty", [dict(repetition_penalty=1.8),
                                     dict(frequency_penalty=1.5),
                                     dict(presence_penalty=2.0)])
def test_penalties_change_greedy_output_on_a_repetitive_prompt(session, penalty) -> None:
    plain = specla.generate(session, REPETITIVE, max_tokens=24, stop_at_eos=False)
    session.reset()
    penalised = specla.generate(session, REPETITIVE, max_tokens=24, stop_at_eos=False, **penalty)
    assert penalised.tokens != plain.tokens
    session.reset()
    # penalty_last_n = 0 counts no tokens: the penalty is off.
    off = specla.generate(session, REPETITIVE, max_tokens=24, stop_at_eos=False,
                          penalty_last_n=0, **penalty)
    assert off.tokens == plain.tokens


def test_sampling_options_equal_the_c_api(session, cli) -> None:
    kwargs = dict(temperature=0.9, top_k=40, seed=11, min_p=0.05, repetition_penalty=1.3,
                  presence_penalty=0.4, frequency_penalty=0.2, penalty_last_n=-1,
                  logit_bias={FORCED: 3.5, 17: -2.0})
    r = specla.generate(session, PROMPT_IDS, max_tokens=24, stop_at_eos=False, **kwargs)
    expected = cli.tokens(PROMPT_IDS, "--max-tokens", "24", "--ignore-eos",
                          "--temperature", "0.9", "--top-k", "40", "--seed", "11",
                          "--min-p", "0.05", "--repeat-penalty", "1.3",
                          "--presence-penalty", "0.4", "--frequency-penalty", "0.2",
                          "--penalty-last-n", "-1", "--logit-bias", f"{FORCED}=3.5",
                          "--logit-bias", "17=-2")
    assert r.tokens == expected


def test_min_p_one_keeps_only_the_top_token(session) -> None:
    greedy = specla.generate(session, PROMPT_IDS, max_tokens=12, stop_at_eos=False)
    session.reset()
    sampled = specla.generate(session, PROMPT_IDS, max_tokens=12, stop_at_eos=False,
                              temperature=1.5, seed=3, min_p=1.0)
    assert sampled.tokens == greedy.tokens


def test_a_logit_bias_token_outside_the_vocabulary_is_the_librarys_error(session) -> None:
    vocab = session.model.info.vocab_size
    for token in (vocab, -1):
        with pytest.raises(specla.InvalidArgumentError, match=r"logit_bias\[0\]\.token"):
            specla.generate(session, PROMPT_IDS, max_tokens=2, logit_bias={token: 1.0})
    with pytest.raises(specla.InvalidArgumentError, match=r"logit_bias\[1\]"):
        specla.generate(session, PROMPT_IDS, max_tokens=2,
                        logit_bias={5: 1.0, 6: float("nan")})
    assert session.n_past == 0  # refused before anything was fed


@pytest.mark.parametrize("kwargs, field", [
    (dict(repetition_penalty=0.0), "repetition_penalty"),
    (dict(presence_penalty=float("inf")), "presence_penalty"),
    (dict(frequency_penalty=float("nan")), "frequency_penalty"),
    (dict(penalty_last_n=-2), "penalty_last_n"),
    (dict(min_p=1.5), "min_p"),
])
def test_bad_values_are_the_librarys_errors_naming_the_field(session, kwargs, field) -> None:
    with pytest.raises(specla.InvalidArgumentError, match=field):
        specla.generate(session, PROMPT_IDS, max_tokens=2, **kwargs)
    with pytest.raises(specla.InvalidArgumentError, match=field):
        next(specla.stream(session, PROMPT_IDS, max_tokens=2, **kwargs))


@pytest.mark.parametrize("bias, message", [
    ([(1, 2.0)], "mapping"),
    ({"1": 2.0}, "integers"),
    ({True: 2.0}, "integers"),
    ({2**40: 1.0}, "range of its C type"),
    ({1: "x"}, "number"),
    ({1: 1e39}, "overflows"),
])
def test_malformed_logit_bias_is_refused_before_the_call(session, bias, message) -> None:
    with pytest.raises(specla.InvalidArgumentError, match=message):
        specla.generate(session, PROMPT_IDS, max_tokens=2, logit_bias=bias)


def test_numpy_ids_and_biases_are_taken(session) -> None:
    import numpy as np
    r = specla.generate(session, PROMPT_IDS, max_tokens=3, stop_at_eos=False,
                        logit_bias={np.int64(FORCED): np.float32(100.0)})
    assert r.tokens == [FORCED] * 3


def test_an_empty_logit_bias_is_none(session) -> None:
    plain = specla.generate(session, PROMPT_IDS, max_tokens=4, stop_at_eos=False)
    session.reset()
    assert specla.generate(session, PROMPT_IDS, max_tokens=4, stop_at_eos=False,
                           logit_bias={}).tokens == plain.tokens


def test_a_random_seed_is_reported_and_repeats_the_run(session, model) -> None:
    """seed=None: the library draws the seed; the result reports it, and passing it back gives
    the same sampled tokens, plain and speculative. A given seed is reported as given."""
    r = specla.generate(session, PROMPT_IDS, max_tokens=16, temperature=1.0, seed=None,
                        stop_at_eos=False)
    assert isinstance(r.seed, int) and r.seed != _capi.SPECLA_SEED_RANDOM
    session.reset()
    again = specla.generate(session, PROMPT_IDS, max_tokens=16, temperature=1.0, seed=r.seed,
                            stop_at_eos=False)
    assert again.tokens == r.tokens and again.seed == r.seed
    session.reset()
    with specla.Drafter.prompt_lookup(model) as d:
        s = specla.generate(session, PROMPT_IDS, max_tokens=16, temperature=1.0, seed=None,
                            stop_at_eos=False, drafter=d)
        assert isinstance(s.seed, int) and s.seed != _capi.SPECLA_SEED_RANDOM
    session.reset()
    assert specla.generate(session, PROMPT_IDS, max_tokens=2).seed == 0
    session.reset()
    st = specla.stream(session, PROMPT_IDS, max_tokens=4, temperature=1.0, seed=77)
    "".join(st)
    assert st.result is not None and st.result.seed == 77
