"""The session: one sequence and its recurrent state, on one model."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Optional, Union

import numpy as np

from . import _capi
from ._arrays import TokenIds, as_token_array, check_out_array
from ._handle import Handle
from .errors import InvalidArgumentError, check

if TYPE_CHECKING:
    from .model import Model

LogitsMode = Literal["none", "last", "all"]
_LOGITS = {"none": _capi.SPECLA_LOGITS_NONE, "last": _capi.SPECLA_LOGITS_LAST,
           "all": _capi.SPECLA_LOGITS_ALL}


StatePath = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class SessionMemory:
    """Every buffer a session owns, in bytes as allocated (``specla_session_memory``).
    ``state + factor + scratch + context == host + device == total``."""
    state_bytes: int    # recurrent state + conv cache (ModelInfo.state_bytes)
    factor_bytes: int   # per-node factors for committing verified tokens (max_tree_nodes)
    scratch_bytes: int  # activations and logits of a pass, tree snapshots, sampling buffers
    context_bytes: int  # the token history
    host_bytes: int     # of all of the above, in host memory
    device_bytes: int   # in GPU memory
    total_bytes: int    # host_bytes + device_bytes


class Session:
    """One sequence: the recurrent state a model's tokens have built so far.

    Sessions of one model may run on different threads at once; one session is used by one
    thread at a time (a second thread, or a call while a :func:`specla.stream` over it is open,
    raises :class:`~specla.errors.StateError`).

    Args:
        model: the model (kept open while the session lives).
        max_tree_nodes: largest draft tree or chain this session will verify (default 64).
        max_batch_tokens: largest block evaluated in one pass; longer prompts are split
            (default 512).
    """

    def __init__(self, model: "Model", *, max_tree_nodes: Optional[int] = None,
                 max_batch_tokens: Optional[int] = None) -> None:
        params = _capi.default_params(_capi.specla_session_params)
        if max_tree_nodes is not None:
            params.max_tree_nodes = max_tree_nodes
        if max_batch_tokens is not None:
            params.max_batch_tokens = max_batch_tokens
        out = _capi.specla_session_p()
        check(_capi.lib.specla_session_create(model._handle.ptr(), ctypes.byref(params),
                                            ctypes.byref(out)))
        self.model = model
        self.max_tree_nodes = int(params.max_tree_nodes)
        self.max_batch_tokens = int(params.max_batch_tokens)
        self._handle = Handle(self, "session", out.value, _capi.lib.specla_session_free,
                              parent=model._handle, exclusive=True)

    # ---- lifetime ----
    def close(self) -> None:
        """Free the session (StateError while a stream over it is open)."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<specla.Session {'closed' if self.closed else f'n_past={self.n_past}'}>"

    # ---- state ----
    @property
    def n_past(self) -> int:
        """Number of tokens the state has consumed."""
        out = ctypes.c_int64()
        with self._handle.use() as ptr:
            check(_capi.lib.specla_session_n_past(ptr, ctypes.byref(out)))
        return out.value

    def reset(self) -> None:
        """Forget the context (zero state and conv cache)."""
        with self._handle.use() as ptr:
            check(_capi.lib.specla_session_reset(ptr))

    def eval(self, tokens: TokenIds, logits: LogitsMode = "last", *,
             out: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
        """Feed tokens through the model, advancing the state.

        Args:
            tokens: at least one token id.
            logits: ``"last"`` returns shape ``(vocab_size,)``, ``"all"`` ``(n, vocab_size)``,
                ``"none"`` returns None (pure prefill).
            out: optional float32 C-contiguous array of that shape, written in place.

        On any error the session is left as it was.
        """
        ids = as_token_array(tokens)
        if logits not in _LOGITS:
            raise InvalidArgumentError(f"logits must be 'none', 'last' or 'all', not {logits!r}")
        vocab = self.model.info.vocab_size
        shape = {"none": None, "last": (vocab,), "all": (ids.size, vocab)}[logits]
        buf: Optional[np.ndarray] = None
        if shape is not None:
            buf = (np.empty(shape, dtype=np.float32) if out is None
                   else check_out_array(out, shape, "out"))
        with self._handle.use() as ptr:
            check(_capi.lib.specla_session_eval(
                ptr, ids.ctypes.data_as(_capi.c_int32_p), ids.size, _LOGITS[logits],
                None if buf is None else buf.ctypes.data_as(_capi.c_float_p),
                0 if buf is None else buf.size))
        return buf

    def get_state(self, layer: Optional[int] = None) -> np.ndarray:
        """The recurrent state as float32: one layer ``[num_v_heads, V, K]`` (the layout of
        flash-linear-attention's state), or with ``layer=None`` all layers stacked
        ``[num_layers, num_v_heads, V, K]``. Pending deferred factors are applied first."""
        info = self.model.info
        per_layer = (info.num_v_heads, info.head_v_dim, info.head_k_dim)
        layers = range(info.num_layers) if layer is None else [layer]
        out = np.empty((len(layers),) + per_layer, dtype=np.float32)
        with self._handle.use() as ptr:
            for i, l in enumerate(layers):
                check(_capi.lib.specla_session_get_state(
                    ptr, l, out[i].ctypes.data_as(_capi.c_float_p), out[i].size))
        return out if layer is None else out[0]

    # ---- saved state, fork, memory ----
    def save_state(self) -> bytes:
        """The session's state (recurrent state, conv cache, context, the pending token) in the
        library's versioned, checksummed format (lib/session/session_state.md): what
        :meth:`load_state` restores, into this session or another of the same model, to
        continue exactly as this one would. A drafter's bookkeeping is not part of it."""
        needed = ctypes.c_size_t()
        with self._handle.use() as ptr:
            status = _capi.lib.specla_session_save_state(ptr, None, 0, ctypes.byref(needed))
            if status != _capi.SPECLA_ERR_CAPACITY:
                check(status)
            buf = ctypes.create_string_buffer(needed.value)
            check(_capi.lib.specla_session_save_state(ptr, buf, needed.value, None))
        return buf.raw

    def load_state(self, state: Union[bytes, bytearray, memoryview]) -> None:
        """Restore a state from :meth:`save_state` (any bytes-like object). Everything is
        checked first: a refused state (FormatError: not a state, truncated, corrupted;
        UnsupportedError: another format version; ShapeError: another model) leaves the
        session as it was."""
        view = memoryview(state).cast("B")
        data: object
        if view.readonly or not view.c_contiguous or not view.nbytes:
            # (bytes pass as a pointer to their buffer; b"" too, so the library sees an empty
            # state, not a NULL buffer.)
            data = state if isinstance(state, bytes) else view.tobytes()
        else:
            data = (ctypes.c_char * view.nbytes).from_buffer(view)
        with self._handle.use() as ptr:
            check(_capi.lib.specla_session_load_state(ptr, data, view.nbytes))

    def save_state_file(self, path: StatePath) -> None:
        """:meth:`save_state` into a file (written as ``path``.part, then renamed over it)."""
        with self._handle.use() as ptr:
            check(_capi.lib.specla_session_save_state_file(ptr, os.fsencode(path)))

    def load_state_file(self, path: StatePath) -> None:
        """:meth:`load_state` from a file written by :meth:`save_state_file`."""
        with self._handle.use() as ptr:
            check(_capi.lib.specla_session_load_state_file(ptr, os.fsencode(path)))

    def copy_state_from(self, other: "Session") -> None:
        """Take ``other``'s state (a session of the same model); ``other`` is unchanged."""
        if other is self:
            return
        with self._handle.use() as dst, other._handle.use() as src:
            check(_capi.lib.specla_session_copy_state(dst, src))

    def fork(self) -> "Session":
        """A new session of the same model and parameters holding this one's state: it
        continues exactly as this one would, and the two go on independently."""
        child = Session(self.model, max_tree_nodes=self.max_tree_nodes,
                        max_batch_tokens=self.max_batch_tokens)
        try:
            child.copy_state_from(self)
        except BaseException:
            child.close()
            raise
        return child

    def memory(self) -> SessionMemory:
        """Every buffer the session owns (:class:`SessionMemory`). Buffers sized by a pass grow
        to the largest draft tree seen, so the numbers may rise after a speculative call."""
        out = _capi.specla_session_memory()
        with self._handle.use() as ptr:
            check(_capi.lib.specla_session_get_memory(ptr, ctypes.byref(out)))
        return SessionMemory(**_capi.info_values(out))

    def verify_tree(self, tokens: TokenIds, parents: TokenIds, **kwargs):  # type: ignore[no-untyped-def]
        """Shorthand for :func:`specla.verify_tree` on this session."""
        from .verify import verify_tree
        return verify_tree(self, tokens, parents, **kwargs)
