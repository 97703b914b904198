# SPDX-License-Identifier: Apache-2.0
"""The server's generation engine: the model, a pool of sessions (one per slot), admission of
requests (a slot, else a bounded wait, else refused) and one worker thread per running request.

Nothing here knows HTTP. A request runs ``specla.stream()`` on a thread of its own (the library
calls release the GIL, so requests run in parallel) and hands its text pieces to the event loop
through an ``asyncio.Queue``; the slot goes back to the pool when that thread is done with the
session, whatever happened to the client.
"""
from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, field
from typing import AsyncIterator, Dict, List, Optional, Union

import specla


class QueueFullError(Exception):
    """Every slot is busy and the wait queue is full."""


class ShuttingDownError(Exception):
    """The server is stopping and takes no more requests."""


@dataclass
class GenerationSpec:
    """One request's generation, as validated by the protocol layer."""
    prompt_ids: List[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop: List[str]
    stop_at_eos: bool = True
    logprobs: Optional[int] = None  # report log-probabilities with this many alternatives
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Dict[int, float] = field(default_factory=dict)  # token id -> bias


# OpenAI's presence and frequency penalties count the tokens of the whole generated text; the
# library's count the last penalty_last_n tokens of the context, the prompt included. -1 (the
# whole context) is the nearest: nothing generated is forgotten, and the prompt counts as well
# (the difference the server documents).
PENALTY_LAST_N = -1


@dataclass
class Finished:
    """The end of a generation: what the response's last chunk and usage report."""
    text: str
    finish_reason: str            # "stop", "length" or "aborted"
    prompt_tokens: int
    completion_tokens: int
    spec_stats: Optional[specla.SpecStats] = None
    logprobs: List[specla.TokenLogprob] = field(default_factory=list)  # tokens after the last piece


@dataclass
class Piece:
    """A piece of streamed text and, when the request asked, the log-probabilities of the
    tokens generated with it (a step whose text is held back hands its tokens to a later piece,
    or to :class:`Finished`)."""
    text: str
    logprobs: List[specla.TokenLogprob] = field(default_factory=list)


@dataclass
class _Slot:
    session: specla.Session
    drafter: Optional[specla.Drafter]


@dataclass(eq=False)  # hashed by identity: a set holds the running ones
class _Running:
    """A request on its worker thread; ``stream`` is set once the thread has made it."""
    stream: Optional[specla.TextStream] = None
    aborted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            if self.stream is not None:
                self.stream.abort()


def _close_slots(slots: List[_Slot]) -> None:
    for slot in slots:
        slot.session.close()
        if slot.drafter is not None:
            slot.drafter.close()


# The worker thread's items on the queue to the event loop: text pieces, then one Finished or
# one exception.
_Item = Union[Piece, Finished, BaseException]


class Engine:
    """Owns the model and the slots; :meth:`generate` is the one way to run a request."""

    def __init__(self, model: specla.Model, *, slots: int = 4, queue: int = 16,
                 speculative: bool = True, model_name: Optional[str] = None,
                 owns_model: bool = False) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        if queue < 0:
            raise ValueError("queue must be 0 or more")
        try:
            model.tokenizer
        except specla.StateError as e:
            raise ValueError(f"{model.folder}: the model has no tokenizer (tokenizer.json); a "
                             f"text server needs one") from e
        self.model = model
        self.model_name = model_name or os.path.basename(os.path.normpath(model.folder))
        self.slots = slots
        self.queue_limit = queue
        self.speculative = speculative
        self._owns_model = owns_model
        self._free: List[_Slot] = []
        try:
            for _ in range(slots):
                drafter = specla.Drafter.prompt_lookup(model) if speculative else None
                try:
                    self._free.append(_Slot(specla.Session(model), drafter))
                except BaseException:
                    if drafter is not None:
                        drafter.close()
                    raise
        except BaseException:  # out of memory at slot k: free the k-1 made
            _close_slots(self._free)
            raise
        self._pool_lock = threading.Lock()
        self._sem: Optional[asyncio.Semaphore] = None  # made on the event loop's thread
        self._waiting = 0
        self._running: set = set()
        self._threads: set = set()
        self.shutting_down = False
        self.closed = False

    @classmethod
    def load(cls, folder: str, *, backend: str = "cpu", threads: int = 0, **kwargs) -> "Engine":
        model = specla.Model.load(folder, backend, threads=threads)
        try:
            return cls(model, owns_model=True, **kwargs)
        except BaseException:
            model.close()
            raise

    # ---- state, for /health ----
    @property
    def active(self) -> int:
        return self.slots - len(self._free)

    @property
    def waiting(self) -> int:
        return self._waiting

    def token_text(self, token: int) -> str:
        """A token's own text (special tokens spelled out), as logprobs entries name it."""
        return self.model.tokenizer.decode([token], skip_special=False)

    def tokenize(self, text: str, *, add_bos: Optional[bool] = None) -> List[int]:
        return self.model.tokenizer.encode(text, add_bos=add_bos)

    # ---- admission ----
    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.slots)
        return self._sem

    async def _admit(self) -> None:
        """Take a slot, waiting in the queue while none is free; refuse when the queue is full."""
        if self.shutting_down:
            raise ShuttingDownError()
        sem = self._semaphore()
        if sem.locked() or self._waiting:  # first come, first served: no overtaking the queue
            if self._waiting >= self.queue_limit:
                raise QueueFullError()
            self._waiting += 1
            try:
                await sem.acquire()
            finally:
                self._waiting -= 1
            if self.shutting_down:
                sem.release()
                raise ShuttingDownError()
        else:
            await sem.acquire()

    # ---- generation ----
    async def generate(self, spec: GenerationSpec) -> AsyncIterator[_Item]:
        """Admit the request, run it on a worker thread, and yield its text pieces, then one
        :class:`Finished`. Leaving the iteration early (a client gone, a cancelled task) aborts
        the generation; the slot is freed when the worker thread is done with it."""
        await self._admit()
        loop = asyncio.get_running_loop()
        items: "asyncio.Queue[_Item]" = asyncio.Queue()
        running = _Running()
        sem = self._sem
        assert sem is not None
        with self._pool_lock:
            slot = self._free.pop()  # the semaphore guarantees one

        def put(item: _Item) -> None:
            loop.call_soon_threadsafe(items.put_nowait, item)

        def release() -> None:
            with self._pool_lock:
                self._free.append(slot)
                self._running.discard(running)
            loop.call_soon_threadsafe(sem.release)

        thread = threading.Thread(target=self._work, args=(slot, spec, running, put, release),
                                  name="specla-request", daemon=True)
        with self._pool_lock:
            self._running.add(running)
            self._threads.add(thread)
        try:
            thread.start()
        except BaseException:
            with self._pool_lock:
                self._threads.discard(thread)
            release()
            raise
        done = False
        try:
            while True:
                item = await items.get()
                if isinstance(item, BaseException):
                    done = True
                    raise item
                yield item
                if isinstance(item, Finished):
                    done = True
                    return
        finally:
            if not done:
                running.abort()

    def _work(self, slot: _Slot, spec: GenerationSpec, running: _Running, put, release) -> None:
        """The worker thread: one generation on the slot's session. The slot goes back before
        the last item is handed over, so a client that has its answer finds its slot free."""
        last: _Item
        try:
            slot.session.reset()
            ts = specla.stream(slot.session, spec.prompt_ids, max_tokens=spec.max_tokens,
                               temperature=spec.temperature, top_p=spec.top_p, seed=spec.seed,
                               stop=spec.stop, stop_at_eos=spec.stop_at_eos,
                               drafter=slot.drafter, logprobs=spec.logprobs is not None,
                               top_logprobs=spec.logprobs or 0,
                               presence_penalty=spec.presence_penalty,
                               frequency_penalty=spec.frequency_penalty,
                               penalty_last_n=PENALTY_LAST_N, logit_bias=spec.logit_bias)
            with running.lock:
                running.stream = ts
                if running.aborted:
                    ts.abort()
            with ts:
                for piece in ts:
                    put(Piece(piece, ts.take_logprobs()))
                result = ts.result
            assert result is not None
            reason = {"eos": "stop", "stop": "stop"}.get(result.finish_reason,
                                                          result.finish_reason)
            last = Finished(result.text, reason, result.prompt_tokens, len(result.tokens),
                            result.spec_stats, ts.take_logprobs())
        except BaseException as e:  # noqa: BLE001 - handed to the request's coroutine
            last = e
        finally:
            try:
                slot.session.reset()
            except Exception:  # noqa: BLE001 - the slot is still usable after the next reset
                pass
            with self._pool_lock:
                self._threads.discard(threading.current_thread())
            release()
        put(last)

    # ---- shutdown ----
    def abort_all(self) -> None:
        """Stop accepting requests and abort the running ones (any thread)."""
        self.shutting_down = True
        with self._pool_lock:
            running_now = list(self._running)
        for running in running_now:
            running.abort()

    def close(self, timeout: float = 10.0) -> None:
        """Abort everything, wait for the worker threads, free the sessions, drafters and (when
        this engine loaded it) the model."""
        if self.closed:
            return
        self.abort_all()
        with self._pool_lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
        with self._pool_lock:
            _close_slots(self._free)
            self._free.clear()
        if self._owns_model:
            self.model.close()
        self.closed = True

