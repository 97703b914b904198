"""The one place where generation meets the C ABI: the pull-style generation API
(``specla_generation_begin/next/abort/end``), driven on the calling thread.

A :class:`Generation` begins on its first :meth:`~Generation.next_step`, which then runs one
library step (the first feeds the prompt; each later one is a decoding step, or a verification
pass with a drafter) and returns its tokens and the text it made final. ``generate()`` loops
over it to the end; ``stream()`` hands its text out as a generator. No worker thread: the
library call blocks the caller and releases the GIL.

Cancellation is ``specla_generation_abort``, which the library allows from any thread, also
while a step runs on another: :meth:`Generation.abort` (what closing a stream, a
KeyboardInterrupt between steps, or another thread calls), or a ``threading.Event`` that a
watcher thread turns into an abort while a step blocks (a long prompt is fed in blocks with an
abort check before each). The session and the drafter belong to the generation from its begin
to its :meth:`~Generation.close` (``specla_generation_end`` + ``_free``), which every path runs.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import List, Literal, Optional, Tuple

import numpy as np

from . import _capi
from ._handle import Handle
from .errors import error_for

FinishReason = Literal["stop", "length", "eos", "aborted"]
# The library's finish reasons as OpenAI-style clients spell them (EOS apart from a stop string,
# which the OpenAI API folds into "stop").
_FINISH: dict = {
    _capi.SPECLA_FINISH_EOS: "eos",
    _capi.SPECLA_FINISH_STOP_STRING: "stop",
    _capi.SPECLA_FINISH_MAX_TOKENS: "length",
    _capi.SPECLA_FINISH_ABORTED: "aborted",
}
# How often a watcher looks at a cancel event while a step blocks: the most it adds to the
# library's own abort latency (one prompt block or one step).
_WATCH_INTERVAL_S = 0.005


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability under the model (log-softmax of the target's logits
    over the tokenizer's ids; sampling settings do not change it) and the most likely
    candidates at its position, most likely first: ``(token id, log-probability)`` pairs."""
    token: int
    logprob: float
    top: Tuple[Tuple[int, float], ...] = ()


@dataclass
class Request:
    """Everything one generation needs, already converted to C structs."""
    session: Handle
    prompt: np.ndarray                      # int32 ids (may be empty: continue the context)
    params: _capi.specla_spec_params        # ->generate: budget, stops, sampling; the rest: drafter
    drafter: Optional[Handle] = None
    _keep: List[object] = field(default_factory=list)  # buffers the structs point into
    logprobs: bool = False                  # the params ask for log-probabilities


@dataclass
class Step:
    """One library step's output."""
    tokens: List[int]
    text: str                               # the text this step made final (may be "")
    finish_reason: Optional[FinishReason]   # None: more steps follow
    stop_index: int                         # which stop string ended it, else -1
    logprobs: List[TokenLogprob] = field(default_factory=list)  # one per token when asked


@dataclass
class Outcome:
    """What a finished (or aborted) generation produced."""
    tokens: List[int]
    text: str
    finish_reason: FinishReason
    stop_index: int
    spec_stats: Optional[_capi.specla_spec_stats]  # with a drafter
    logprobs: Optional[List[TokenLogprob]] = None  # when the request asked for them
    seed: Optional[int] = None              # the seed used (None: the generation never began)


def _step_logprobs(step: _capi.specla_generation_step, tokens: List[int]) -> List[TokenLogprob]:
    """The step's log-probabilities as objects (copied: the step's buffers live until the next
    call)."""
    if not step.logprobs or not tokens:
        return []
    k = int(step.n_top)
    lps = step.logprobs[:len(tokens)]
    ids = step.top_ids[:len(tokens) * k] if k else []
    tops = step.top_logprobs[:len(tokens) * k] if k else []
    return [TokenLogprob(t, float(lps[i]),
                         tuple((int(ids[i * k + j]), float(tops[i * k + j])) for j in range(k)))
            for i, t in enumerate(tokens)]


class Generation:
    """One pull generation (see the module docstring). Use from one thread, except
    :meth:`abort`, which any thread may call at any time."""

    def __init__(self, request: Request, cancel: Optional[threading.Event] = None) -> None:
        self._req = request
        self._cancel = cancel
        self._gen: Optional[int] = None       # the library handle, between begin and close
        self._lock = threading.Lock()         # abort vs free (the C ABI forbids them at once)
        self._closed = threading.Event()
        self._watcher: Optional[threading.Thread] = None
        self._held = False                    # the session (and drafter) are taken
        self._tokens: List[int] = []
        self._pieces: List[str] = []
        self._finish: Optional[FinishReason] = None
        self._stop_index = -1
        self._logprobs: List[TokenLogprob] = []
        self.outcome: Optional[Outcome] = None

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    # ---- begin ----
    def _begin(self) -> None:
        req = self._req
        session = req.session.acquire_use()
        try:
            drafter = req.drafter.acquire_use() if req.drafter is not None else None
        except BaseException:
            req.session.release_use()
            raise
        self._held = True
        out = _capi.specla_generation_p()
        prompt_p = req.prompt.ctypes.data_as(_capi.c_int32_p) if req.prompt.size else None
        status = _capi.lib.specla_generation_begin(session, drafter, prompt_p, req.prompt.size,
                                                   ctypes.byref(req.params), ctypes.byref(out))
        if status != _capi.SPECLA_OK:
            error = error_for(status)  # read on this thread, right after the call
            self._release()
            raise error
        self._gen = out.value
        if self._cancel is not None:
            if self._cancel.is_set():
                self.abort()  # the first step then returns at once, nothing fed
            else:
                self._watcher = threading.Thread(target=self._watch, name="specla-cancel",
                                                 daemon=True)
                self._watcher.start()

    def _watch(self) -> None:
        assert self._cancel is not None
        while not self._closed.is_set():
            if self._cancel.wait(_WATCH_INTERVAL_S):
                self.abort()
                return

    # ---- steps ----
    def next_step(self) -> Optional[Step]:
        """Run one step; None once the generation has finished (then :attr:`outcome` is set
        and the session is free again). A failing step closes the generation and raises."""
        if self.outcome is not None or self._closed.is_set():
            return None
        try:
            if self._gen is None:
                self._begin()
            step = _capi.specla_generation_step()
            status = _capi.lib.specla_generation_next(self._gen, ctypes.byref(step))
            if status != _capi.SPECLA_OK:
                raise error_for(status)
            tokens = step.tokens[:step.n_tokens] if step.n_tokens else []
            text = (ctypes.string_at(step.text, step.text_len).decode("utf-8", "replace")
                    if step.text_len else "")
            reason = _FINISH.get(step.finish_reason)
            logprobs = _step_logprobs(step, tokens)
            self._logprobs.extend(logprobs)
            self._tokens.extend(tokens)
            if text:
                self._pieces.append(text)
            if reason is not None:
                self._finish, self._stop_index = reason, int(step.stop_index)
                self.close()
            return Step(tokens, text, reason, int(step.stop_index), logprobs)
        except BaseException:
            # A failed step, or a KeyboardInterrupt that arrived during it: stop the library's
            # generation, give the session back, and let the exception through.
            self.abort()
            self.close()
            raise

    def run(self) -> Outcome:
        """Every step to the end, on the calling thread."""
        while self.next_step() is not None:
            pass
        assert self.outcome is not None
        return self.outcome

    # ---- stop and end ----
    def abort(self) -> None:
        """Ask the generation to stop (any thread): a running step returns within one prompt
        block or one step with finish reason "aborted"; without one, the next step does."""
        with self._lock:
            if self._gen is not None:
                # SPECLA_ERR_STATE after the end: nothing left to stop.
                _capi.lib.specla_generation_abort(self._gen)

    def close(self) -> None:
        """End the generation (finished or not) and free the session and the drafter; an
        unfinished one ends "aborted" (its text held back is dropped). Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()
        stats: Optional[_capi.specla_spec_stats] = None
        with self._lock:
            gen, self._gen = self._gen, None
            if gen is not None:
                _capi.lib.specla_generation_end(gen)
                # Plain generations too: the statistics carry the seed the generation used.
                stats = _capi.specla_spec_stats()
                _capi.lib.specla_generation_stats(gen, ctypes.byref(stats))
                _capi.lib.specla_generation_free(gen)
        seed = int(stats.seed) if stats is not None else None  # None: it never began
        if self._req.drafter is None:
            stats = None
        elif stats is None:
            stats = _capi.specla_spec_stats()  # never began: nothing drafted
        self._release()
        self.outcome = Outcome(self._tokens, "".join(self._pieces), self._finish or "aborted",
                               self._stop_index, stats,
                               self._logprobs if self._req.logprobs else None, seed)

    def _release(self) -> None:
        if self._held:
            self._held = False
            self._req.session.release_use()
            if self._req.drafter is not None:
                self._req.drafter.release_use()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
