"""Ownership of library handles: deterministic close, finalizers, and the order the C ABI needs.

The C ABI frees each handle with its own ``*_free`` and wants sessions, drafters and borrowed
tokenizers released before their model. A :class:`Handle` holds one pointer and its free
function; it is closed by ``close()`` (or a ``with`` block) or, failing that, by a
``weakref.finalize`` when its Python owner is collected or the interpreter exits. A handle that
others depend on (a model) counts its dependants and frees its pointer only once it is closed
*and* the last dependant is released, so closing a model before its sessions is safe.

Thread use: the C ABI lets one session (and one drafter) be used by one thread at a time.
:meth:`Handle.use` enforces that for the handles created with ``exclusive=True``: a second thread
(or a stream still open on the session) gets a :class:`~specla.errors.StateError` instead of a
data race inside the library.
"""
from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from .errors import StateError


class Handle:
    """One library pointer, its free function, and its dependants."""

    def __init__(self, owner: Any, kind: str, ptr: int, free: Callable[[int], None], *,
                 parent: Optional["Handle"] = None, borrowed_from: Optional["Handle"] = None,
                 exclusive: bool = False) -> None:
        """``parent``: a handle this one keeps alive until it is released (a session's model).
        ``borrowed_from``: a handle whose library object owns this pointer (a model's own
        tokenizer): valid while that object lives, whether or not its Python owner closed it."""
        self.kind = kind
        self._borrowed_from = borrowed_from
        self._ptr: Optional[int] = ptr
        self._free = free
        self._parent = parent
        self._dependants = 0
        self._closed = False
        self._lock = threading.Lock()
        self._busy = threading.Lock() if exclusive else None
        if parent is not None:
            parent._acquire_dependant()
        # The finalizer holds the handle (not its owner), so it runs when the owner goes away.
        self._finalizer = weakref.finalize(owner, Handle._finalize, self)

    # ---- lifetime ----
    @property
    def closed(self) -> bool:
        return self._closed

    def ptr(self) -> int:
        """The pointer, or StateError when closed."""
        if self._closed or self._ptr is None:
            raise StateError(f"the {self.kind} is closed")
        if self._borrowed_from is not None and self._borrowed_from._ptr is None:
            raise StateError(f"the {self.kind} belonged to a {self._borrowed_from.kind} that "
                             f"is freed now")
        return self._ptr

    def live_ptr(self) -> int:
        """The pointer while the library object lives: after close(), as long as dependants
        keep it (for what those dependants need of it, like a closed model's tokenizer)."""
        if self._ptr is None:
            raise StateError(f"the {self.kind} is closed")
        return self._ptr

    def close(self) -> None:
        """Close: the pointer is freed now, or (with live dependants) when the last one goes."""
        with self._lock:
            if self._closed:
                return
            if self._busy is not None and not self._busy.acquire(blocking=False):
                raise StateError(f"the {self.kind} is in use (by another thread or an open "
                                 f"stream); close the stream first")
            self._closed = True
            free_now = self._dependants == 0
        if self._busy is not None:
            self._busy.release()
        self._finalizer.detach()
        if free_now:
            self._release()

    def _finalize(self) -> None:
        try:
            self.close()
        except StateError:
            # Still in use at interpreter exit (an open stream's step): freeing it under the
            # running call would be worse than leaving it to the process's end.
            pass

    def _release(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            self._free(ptr)
        if self._parent is not None:
            parent, self._parent = self._parent, None
            parent._release_dependant()

    def _acquire_dependant(self) -> None:
        with self._lock:
            if self._closed:
                raise StateError(f"the {self.kind} is closed")
            self._dependants += 1

    def _release_dependant(self) -> None:
        with self._lock:
            self._dependants -= 1
            free_now = self._closed and self._dependants == 0 and self._ptr is not None
        if free_now:
            self._release()

    # ---- exclusive use ----
    def acquire_use(self) -> int:
        """Take the handle for exclusive use and return its pointer; pair with release_use()
        (which may be called from another thread: a stream dropped on another thread
        releases what its consumer took)."""
        if self._busy is not None and not self._busy.acquire(blocking=False):
            raise StateError(f"the {self.kind} is in use by another thread or an open stream "
                             f"(the C ABI allows one thread at a time per {self.kind})")
        try:
            return self.ptr()
        except BaseException:
            self.release_use()
            raise

    def release_use(self) -> None:
        if self._busy is not None:
            self._busy.release()

    @contextmanager
    def use(self) -> Iterator[int]:
        """Hold the handle for one call; yields the pointer."""
        ptr = self.acquire_use()
        try:
            yield ptr
        finally:
            self.release_use()
