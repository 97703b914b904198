"""The one place where generation meets the C ABI: a request goes in, tokens and text pieces
come out, and the caller may stop it between tokens.

Today's C ABI generates inside one call (``specla_generate`` / ``specla_generate_speculative``)
and reports each token through the ``on_token`` callback, whose ``false`` stops it. So:

* :meth:`TokenSource.run` makes that call on the calling thread, handing every
  ``(token, piece)`` to a sink that says whether to go on (``generate()`` uses it);
* :meth:`TokenSource.events` turns it into a pull iterator (``stream()`` uses it): the call runs
  on a worker thread whose callback hands one event at a time through a one-slot queue and waits
  for the consumer, so the worker never runs more than one token ahead; closing the iterator or
  setting the cancel event makes the next callback return ``false``.

When the pull-style API (``specla_generation_begin/next/abort/end``) reaches the C ABI, this
module is the only one to change: ``run`` becomes begin + a loop of next + end on the calling
thread, ``events`` the same loop as a generator (no worker thread, ``close`` = abort), and the
finish reason comes from the library instead of :func:`_finish_reason`'s inference below.
"""
from __future__ import annotations

import ctypes
import queue
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from . import _capi
from ._handle import Handle
from .errors import error_for

# (token id, text piece). The last event of a generation with a tokenizer may be (-1, text the
# decoder held back), as the C callback delivers it.
TokenEvent = Tuple[int, str]
Sink = Callable[[int, str], bool]


@dataclass
class Request:
    """Everything one generation needs, already converted to C structs."""
    session: Handle
    prompt: np.ndarray                      # int32 ids (may be empty)
    params: _capi.specla_generate_params    # on_token/user_data are filled in per call
    stop: Sequence[str]
    eos_token_id: int                       # -1: no EOS stop
    drafter: Optional[Handle] = None
    spec: Optional[_capi.specla_spec_params] = None  # with a drafter
    _keep: List[object] = field(default_factory=list)  # buffers the structs point into


@dataclass
class Outcome:
    """What a finished (or stopped) generation produced."""
    tokens: List[int]
    text: str                 # the pieces, concatenated
    finish_reason: str        # "stop", "length" or "cancelled"
    spec_stats: Optional[_capi.specla_spec_stats]


class TokenSource:
    """One generation over the callback API (see the module docstring)."""

    def __init__(self, request: Request) -> None:
        self._req = request

    # ---- synchronous: the calling thread runs the generation ----
    def run(self, sink: Optional[Sink] = None) -> Outcome:
        """Generate to the end (or until ``sink`` returns False); exceptions raised by the sink
        (KeyboardInterrupt included) stop the generation and are re-raised here."""
        req = self._req
        tokens: List[int] = []
        pieces: List[str] = []
        stopped = False
        raised: List[BaseException] = []

        def on_token(token: int, piece: Optional[bytes], _user: object) -> bool:
            nonlocal stopped
            try:
                text = piece.decode("utf-8", "replace") if piece else ""
                if token >= 0:
                    tokens.append(token)
                pieces.append(text)
                if sink is not None and not sink(token, text) and token >= 0:
                    stopped = True
                    return False
                return True
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                raised.append(e)
                stopped = True
                return False

        callback = _capi.specla_token_callback(on_token)
        stats = _capi.specla_spec_stats() if req.drafter is not None else None
        n_out = ctypes.c_size_t()
        prompt_p = req.prompt.ctypes.data_as(_capi.c_int32_p) if req.prompt.size else None
        session = req.session.acquire_use()
        try:
            drafter = req.drafter.acquire_use() if req.drafter is not None else None
            try:
                if req.spec is not None:
                    params = req.spec
                    params.generate.on_token = callback
                    status = _capi.lib.specla_generate_speculative(
                        session, drafter, prompt_p, req.prompt.size, params, None, 0,
                        ctypes.byref(n_out), ctypes.byref(stats))
                else:
                    params = req.params
                    params.on_token = callback
                    status = _capi.lib.specla_generate(session, prompt_p, req.prompt.size,
                                                       params, None, 0, ctypes.byref(n_out))
                # Read on this thread, right after the call, as specla_last_error requires.
                error = None if status == _capi.SPECLA_OK else error_for(status)
            finally:
                if req.drafter is not None:
                    req.drafter.release_use()
        finally:
            req.session.release_use()
        if raised:
            raise raised[0]
        if error is not None:
            raise error
        text = "".join(pieces)
        reason = "cancelled" if stopped else _finish_reason(
            tokens, text, req.stop, req.eos_token_id, req.params.max_tokens)
        return Outcome(tokens, text, reason, stats)

    # ---- pull: a worker thread runs the generation, the consumer pulls events ----
    def events(self, cancel: Optional[threading.Event] = None) -> "EventIterator":
        return EventIterator(self, cancel)


def _finish_reason(tokens: List[int], text: str, stop: Sequence[str], eos: int,
                   max_tokens: int) -> str:
    """Why the library stopped, as far as its outputs tell (the pull API will say it)."""
    if tokens and eos >= 0 and tokens[-1] == eos:
        return "stop"
    if any(s in text for s in stop):
        return "stop"
    return "length" if len(tokens) >= max_tokens else "stop"


_DONE = object()


class EventIterator(Iterator[TokenEvent]):
    """Pulls ``(token, piece)`` events from a generation running on a worker thread.

    The session (and drafter) are taken at the first ``next`` and given back when the worker
    ends; :meth:`close` stops the generation at the next token and waits for the worker.
    ``outcome`` holds the result once the iterator is exhausted.
    """

    def __init__(self, source: TokenSource, cancel: Optional[threading.Event]) -> None:
        self._source = source
        self._cancel = cancel
        self._queue: "queue.Queue[object]" = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._finished = False
        self.outcome: Optional[Outcome] = None

    def _work(self) -> None:
        stop, cancel, q = self._stop, self._cancel, self._queue

        def sink(token: int, piece: str) -> bool:
            if stop.is_set():
                return False  # nobody is listening any more
            q.put((token, piece))  # waits while the consumer has not taken the previous one
            return not (stop.is_set() or (cancel is not None and cancel.is_set()))

        try:
            result: object = self._source.run(sink)
        except BaseException as e:  # noqa: BLE001 - delivered to the consumer
            result = e
        q.put((_DONE, result))

    def __next__(self) -> TokenEvent:
        if self._finished:
            raise StopIteration
        if self._thread is None:
            if self._cancel is not None and self._cancel.is_set():
                self._finished = True
                req = self._source._req
                self.outcome = Outcome([], "", "cancelled", _capi.specla_spec_stats()
                                       if req.drafter is not None else None)
                raise StopIteration
            self._thread = threading.Thread(target=self._work, name="specla-stream", daemon=True)
            self._thread.start()
        item = self._queue.get()
        assert isinstance(item, tuple)
        if item[0] is _DONE:
            self._finished = True
            self._thread.join()
            result = item[1]
            if isinstance(result, BaseException):
                raise result
            assert isinstance(result, Outcome)
            self.outcome = result
            raise StopIteration
        return item  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the generation (at the next token) and wait until the session is free again."""
        if self._finished:
            return
        self._finished = True
        self._stop.set()
        if self._thread is None:
            return
        while True:  # unblock the worker's put, then wait for its end
            item = self._queue.get()
            if isinstance(item, tuple) and item[0] is _DONE:
                break
        self._thread.join()
        result = item[1]
        if isinstance(result, Outcome):
            result.finish_reason = "cancelled"
            self.outcome = result
