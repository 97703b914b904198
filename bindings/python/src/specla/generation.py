"""Text generation: ``generate()`` returns the whole result, ``stream()`` yields its pieces.

Both take a prompt as text (tokenized with the model's tokenizer, BOS per its default, special
tokens parsed: what ``specla_generate_text`` does) or as token ids, the sampling parameters, stop
strings, and optionally a :class:`~specla.Drafter` for speculative decoding, whose output is
exactly what plain decoding gives (token for token when greedy).
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, List, Literal, Mapping, Optional, Tuple, Union


from . import _capi
from ._arrays import TokenIds, as_token_array
from ._params import DEFAULT_PENALTY_LAST_N, DEFAULT_REPETITION_PENALTY
from ._params import TREE_ALGORITHMS as _TREE
from ._params import TREE_SHAPES as _SHAPES
from ._params import assign, sampling_params
from ._token_source import FinishReason, Generation, Outcome, Request, TokenLogprob
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from .drafter import Drafter
    from .session import Session

Prompt = Union[str, TokenIds]
TreeAlgorithm = Literal["auto", "hybrid", "parallel_wy"]
TreeShape = Literal["auto", "dynamic", "fixed_width"]


@dataclass(frozen=True)
class SpecOptions:
    """How speculative decoding drafts and verifies (``specla_spec_params``); None keeps the
    library's default (shown in brackets)."""
    max_draft_nodes: Optional[int] = None      # nodes per verification [4]
    max_draft_depth: Optional[int] = None      # deepest draft position [8]
    tree_algorithm: TreeAlgorithm = "auto"
    deferred_commit: Optional[bool] = None     # apply accepted factors in the next pass [True]
    tree_top_k: Optional[int] = None           # EAGLE: children per node [4]
    tree_prune_margin: Optional[float] = None  # EAGLE: nats from the best path [8]
    tree_size_from_cost: Optional[bool] = None  # EAGLE: node count from measured costs [True]
    # greedy generations take plain steps while speculation measures below this multiple of
    # plain decoding's tokens/s (sampled ones always speculate); 0: always speculate [1.0]
    speculation_min_gain: Optional[float] = None
    # EAGLE: "dynamic" (confidence-pruned levels), "fixed_width" (greedy: top_k nodes per level
    # down to max_draft_depth, drafted in one device call where the backend can) or "auto"
    tree_shape: TreeShape = "auto"


@dataclass(frozen=True)
class SpecStats:
    """What the drafter and the verifier did (``specla_spec_stats``)."""
    steps: int                   # verification passes
    drafted: int                 # draft tokens submitted
    accepted: int                # draft tokens accepted
    generated: int               # tokens emitted (accepted + the target's own)
    mean_accepted_length: float  # (generated - plain_steps) / steps
    acceptance_rate: float       # accepted / drafted
    drafted_at_depth: Tuple[int, ...]   # draft nodes at depth d+1 (trailing zeros dropped)
    accepted_at_depth: Tuple[int, ...]  # passes that accepted depth d+1 (trailing zeros dropped)
    plain_steps: int = 0         # plain steps taken where speculation measured slower

    @classmethod
    def _from_c(cls, raw: _capi.specla_spec_stats) -> "SpecStats":
        def trimmed(arr: ctypes.Array) -> Tuple[int, ...]:
            values = list(arr)
            while values and values[-1] == 0:
                values.pop()
            return tuple(values)
        return cls(raw.steps, raw.drafted, raw.accepted, raw.generated,
                   raw.mean_accepted_length, raw.acceptance_rate,
                   trimmed(raw.drafted_at_depth), trimmed(raw.accepted_at_depth), raw.plain_steps)


@dataclass(frozen=True)
class GenerationResult:
    """The result of :func:`generate` (and of a finished :class:`TextStream`)."""
    text: str                     # generated text, as the library made it ("" without a
                                  # tokenizer; EOS and the stop string left out by default)
    tokens: List[int]             # generated token ids (EOS included when it ended the text)
    prompt_tokens: int            # ids the prompt was fed as
    finish_reason: FinishReason   # "eos", "stop" (a stop string), "length", "aborted"
    stop_index: int = -1          # with "stop": which of the stop strings
    spec_stats: Optional[SpecStats] = None  # with a drafter
    logprobs: Optional[List[TokenLogprob]] = None  # with logprobs=True: one per token
    seed: Optional[int] = None    # the seed the generation used (the one drawn for seed=None;
                                  # pass it back to repeat a sampled run)


def _request(session: "Session", prompt: Prompt, *, max_tokens: int, temperature: float,
             top_k: int, top_p: float, seed: Optional[int], stop: Iterable[str], stop_at_eos: bool,
             include_special_tokens: bool, include_stop_string: bool,
             drafter: Optional["Drafter"], spec: Optional[SpecOptions],
             logprobs: bool = False, top_logprobs: int = 0, min_p: float = 0.0,
             repetition_penalty: float = DEFAULT_REPETITION_PENALTY,
             presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
             penalty_last_n: int = DEFAULT_PENALTY_LAST_N,
             logit_bias: Optional[Mapping[int, float]] = None) -> Request:
    model = session.model
    if isinstance(prompt, str):
        ids = model.tokenizer.encode_array(prompt)
    elif isinstance(prompt, (bytes, bytearray)):
        raise InvalidArgumentError("prompt: pass text as str or token ids, not bytes")
    else:
        ids = as_token_array(prompt, "prompt")
    stops = [stop] if isinstance(stop, str) else list(stop)
    for i, s in enumerate(stops):
        if not isinstance(s, str):
            raise InvalidArgumentError(f"stop string {i} is not a str: {s!r}")
        if "\0" in s:
            raise InvalidArgumentError(f"stop string {i} contains a NUL character")

    keep: List[object] = []  # what the params point to lives with the request
    sampling = sampling_params(keep, temperature=temperature, top_k=top_k, top_p=top_p,
                               seed=seed, min_p=min_p, repetition_penalty=repetition_penalty,
                               presence_penalty=presence_penalty,
                               frequency_penalty=frequency_penalty,
                               penalty_last_n=penalty_last_n, logit_bias=logit_bias)
    gp = _capi.default_params(_capi.specla_generate_params)
    assign(gp, "max_tokens", max_tokens)
    gp.sampling = ctypes.pointer(sampling)
    gp.stop_at_eos = bool(stop_at_eos)
    gp.include_special_tokens = bool(include_special_tokens)
    gp.include_stop_string = bool(include_stop_string)
    gp.logprobs = bool(logprobs)
    assign(gp, "top_logprobs", top_logprobs)
    keep += [sampling, gp]
    if stops:
        arr = (ctypes.c_char_p * len(stops))(*[s.encode("utf-8") for s in stops])
        keep.append(arr)
        gp.stop_strings = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
        gp.n_stop_strings = len(stops)
    sp = _capi.default_params(_capi.specla_spec_params)
    if drafter is not None:
        if drafter.model is not model:
            raise InvalidArgumentError("drafter: it was created for another model than the "
                                       "session's")
        opts = spec or SpecOptions()
        for name in ("max_draft_nodes", "max_draft_depth", "tree_top_k", "tree_prune_margin",
                     "speculation_min_gain"):
            value = getattr(opts, name)
            if value is not None:
                assign(sp, name, value, f"spec.{name}")
        for name in ("deferred_commit", "tree_size_from_cost"):
            value = getattr(opts, name)
            if value is not None:
                setattr(sp, name, bool(value))
        if opts.tree_algorithm not in _TREE:
            raise InvalidArgumentError(f"spec.tree_algorithm must be one of {sorted(_TREE)}, "
                                       f"not {opts.tree_algorithm!r}")
        sp.tree_algorithm = _TREE[opts.tree_algorithm]
        if opts.tree_shape not in _SHAPES:
            raise InvalidArgumentError(f"spec.tree_shape must be one of {sorted(_SHAPES)}, "
                                       f"not {opts.tree_shape!r}")
        sp.tree_shape = _SHAPES[opts.tree_shape]
    elif spec is not None:
        raise InvalidArgumentError("spec options given without a drafter")
    sp.generate = ctypes.pointer(gp)
    return Request(session._handle, ids, sp, drafter._handle if drafter is not None else None,
                   keep, bool(logprobs))


def _result(req: Request, outcome: Outcome) -> GenerationResult:
    stats = SpecStats._from_c(outcome.spec_stats) if outcome.spec_stats is not None else None
    return GenerationResult(outcome.text, outcome.tokens, int(req.prompt.size),
                            outcome.finish_reason, outcome.stop_index, stats, outcome.logprobs,
                            outcome.seed)


def generate(session: "Session", prompt: Prompt = (), *, max_tokens: int = 128,
             temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: Optional[int] = 0,
             stop: Iterable[str] = (), stop_at_eos: bool = True,
             include_special_tokens: bool = False, include_stop_string: bool = False,
             drafter: Optional["Drafter"] = None, spec: Optional[SpecOptions] = None,
             cancel: Optional[threading.Event] = None, logprobs: bool = False,
             top_logprobs: int = 0, min_p: float = 0.0,
             repetition_penalty: float = DEFAULT_REPETITION_PENALTY,
             presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
             penalty_last_n: int = DEFAULT_PENALTY_LAST_N,
             logit_bias: Optional[Mapping[int, float]] = None) -> GenerationResult:
    """Evaluate the prompt and generate, on the calling thread.

    Args:
        session: the session; its context continues (an empty prompt continues it as is).
        prompt: text, or token ids.
        max_tokens: token budget.
        temperature: 0 = greedy; top_k (0 = off), top_p (1 = off), seed: sampling (None: a
            random seed, reported in ``GenerationResult.seed``).
        min_p: keep tokens whose probability is at least min_p x the top token's (0 = off).
        repetition_penalty (1 = off; > 1 discourages repeats), presence_penalty and
            frequency_penalty (0 = off; subtracted once, resp. per occurrence, from the logit
            of a token seen): over the last penalty_last_n tokens of the context, the prompt
            included (-1: the whole context; 0: none).
        logit_bias: {token id: bias} added to those tokens' logits before anything else
            (+100 practically forces a token, -100 bans it); copied by the library.
        stop: strings that end generation after the token completing one; the text ends
            where the stop string begins (``include_stop_string=True``: after it).
        stop_at_eos: stop after the model's EOS token.
        include_special_tokens: keep special tokens (EOS...) in the text (the token ids
            always hold them).
        include_stop_string: keep the stop string that ended generation in the text.
        drafter: speculative decoding with this drafter (same output as plain decoding).
        spec: speculative options (with a drafter).
        cancel: a ``threading.Event``; setting it (from any thread) stops the generation
            within one prompt block or one step, with finish reason "aborted".
        logprobs: report each generated token's log-probability under the model (the
            log-softmax of its logits; sampling settings do not change it) in
            ``GenerationResult.logprobs``; top_logprobs (0..20): also that many most likely
            candidates per position.

    Ctrl-C (KeyboardInterrupt) stops the generation when the running step returns (the
    first step feeds the whole prompt) and is re-raised; the session keeps what was fed.
    """
    req = _request(session, prompt, max_tokens=max_tokens, temperature=temperature,
                   top_k=top_k, top_p=top_p, seed=seed, stop=stop, stop_at_eos=stop_at_eos,
                   include_special_tokens=include_special_tokens,
                   include_stop_string=include_stop_string, drafter=drafter, spec=spec,
                   logprobs=logprobs, top_logprobs=top_logprobs, min_p=min_p,
                   repetition_penalty=repetition_penalty, presence_penalty=presence_penalty,
                   frequency_penalty=frequency_penalty, penalty_last_n=penalty_last_n,
                   logit_bias=logit_bias)
    return _result(req, Generation(req, cancel).run())


class TextStream(Generator[str, None, None]):
    """The generator :func:`stream` returns: iterate it for text pieces.

    ``close()`` (or leaving a ``with`` block, or dropping it) aborts the generation and frees
    the session; so do setting the ``cancel`` event given to :func:`stream` and :meth:`abort`
    from another thread (both also stop a step that is running). After the last piece,
    :attr:`result` holds the :class:`GenerationResult`.
    """

    def __init__(self, req: Request, cancel: Optional[threading.Event]) -> None:
        self._req = req
        self._gen = Generation(req, cancel)
        self.result: Optional[GenerationResult] = None
        self._new_logprobs: List[TokenLogprob] = []

    def send(self, value: None) -> str:
        while True:
            step = self._gen.next_step()
            if step is None:
                self._finish()
                raise StopIteration
            self._new_logprobs.extend(step.logprobs)
            if step.text:
                return step.text

    def take_logprobs(self) -> List[TokenLogprob]:
        """With ``logprobs=True``: the log-probabilities of the tokens generated since the last
        call (a piece's tokens: read it after each piece; the tokens of a step whose text is
        held back come with a later piece, or after the last one)."""
        taken, self._new_logprobs = self._new_logprobs, []
        return taken

    def throw(self, typ, val=None, tb=None):  # type: ignore[no-untyped-def, override]
        self.close()
        if val is None:
            val = typ() if isinstance(typ, type) else typ
        raise val

    def abort(self) -> None:
        """Stop the generation; callable from any thread, also while a step runs (it returns
        within one prompt block or one step). The stream then ends with "aborted"."""
        self._gen.abort()

    def close(self) -> None:
        """Abort the generation and free the session now."""
        self._gen.abort()
        self._gen.close()
        self._finish()

    def _finish(self) -> None:
        if self.result is None and self._gen.outcome is not None:
            self.result = _result(self._req, self._gen.outcome)

    def __enter__(self) -> "TextStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._gen.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def stream(session: "Session", prompt: Prompt = (), *, max_tokens: int = 128,
           temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: Optional[int] = 0,
           stop: Iterable[str] = (), stop_at_eos: bool = True,
           include_special_tokens: bool = False, include_stop_string: bool = False,
           drafter: Optional["Drafter"] = None, spec: Optional[SpecOptions] = None,
           cancel: Optional[threading.Event] = None, logprobs: bool = False,
           top_logprobs: int = 0, min_p: float = 0.0,
           repetition_penalty: float = DEFAULT_REPETITION_PENALTY,
           presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
           penalty_last_n: int = DEFAULT_PENALTY_LAST_N,
           logit_bias: Optional[Mapping[int, float]] = None) -> TextStream:
    """Generate as :func:`generate` does, yielding the text as it is produced.

    Each piece is the text one library step made final (one token, or with a drafter one
    verification pass); pieces never split a UTF-8 character, never hold text taken back later
    (a possible stop string is held back until it is not one), and concatenate to the full
    text. Arguments are checked here; generation begins at the first ``next()``, on the
    calling thread. Cancel by closing the generator, by setting ``cancel`` or calling
    :meth:`TextStream.abort` (from any thread): a running step returns within one prompt block
    or one step, and the stream ends with finish reason "aborted".
    While the stream is open, the session (and drafter) are busy: other calls on them raise
    :class:`~specla.errors.StateError`.
    """
    req = _request(session, prompt, max_tokens=max_tokens, temperature=temperature,
                   top_k=top_k, top_p=top_p, seed=seed, stop=stop, stop_at_eos=stop_at_eos,
                   include_special_tokens=include_special_tokens,
                   include_stop_string=include_stop_string, drafter=drafter, spec=spec,
                   logprobs=logprobs, top_logprobs=top_logprobs, min_p=min_p,
                   repetition_penalty=repetition_penalty, presence_penalty=presence_penalty,
                   frequency_penalty=frequency_penalty, penalty_last_n=penalty_last_n,
                   logit_bias=logit_bias)
    return TextStream(req, cancel)
