"""The model: a loaded checkpoint, immutable and shareable by any number of threads."""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Optional, Union

from . import _capi
from ._handle import Handle
from .errors import InvalidArgumentError, check

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

Backend = Literal["cpu", "cuda"]
_BACKENDS = {"cpu": _capi.SPECLA_BACKEND_CPU, "cuda": _capi.SPECLA_BACKEND_CUDA}
_BACKEND_NAMES = {v: k for k, v in _BACKENDS.items()}

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class ModelInfo:
    """What the loaded model is (``specla_model_info``). Sizes are element counts."""
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_size: int
    intermediate_size: int
    bos_token_id: int  # -1 when none
    eos_token_id: int  # -1 when none
    num_parameters: int
    state_bytes: int   # recurrent state + conv cache of one session
    backend: Backend
    has_tokenizer: bool


@dataclass(frozen=True)
class MemoryStats:
    """Memory the model's backend holds (``specla_memory_stats``); arena fields are 0 on CPU."""
    weight_bytes: int
    arena_reserved_bytes: int
    arena_used_bytes: int
    arena_peak_bytes: int
    arena_blocks: int
    live_allocations: int


def encode_path(path: PathLike, what: str) -> bytes:
    """A filesystem path as the bytes the C ABI takes."""
    p = os.fsencode(os.fspath(path))
    if b"\0" in p:
        raise InvalidArgumentError(f"{what}: the path contains a NUL byte")
    return p


class Model:
    """A Gated DeltaNet checkpoint loaded by libspecla.

    Create with :meth:`load`; release with :meth:`close` or a ``with`` block (or let the garbage
    collector do it). Closing a model whose sessions, drafters or tokenizer are still open is
    safe: the library's model is freed when the last of them is closed.
    """

    def __init__(self, ptr: int, folder: str) -> None:
        self._handle = Handle(self, "model", ptr, _capi.lib.specla_model_free)
        self.folder = folder
        raw = _capi.specla_model_info()
        check(_capi.lib.specla_model_get_info(ptr, ctypes.byref(raw)))
        values = _capi.info_values(raw)
        values["backend"] = _BACKEND_NAMES.get(values["backend"], str(values["backend"]))
        self._info = ModelInfo(**values)
        self._tokenizer: Optional["Tokenizer"] = None

    @classmethod
    def load(cls, folder: PathLike, backend: Backend = "cpu", *, threads: int = 0,
             device: int = 0, load_tokenizer: bool = True,
             arena_block_bytes: int = 0) -> "Model":
        """Load a Hugging Face checkpoint folder (config.json + safetensors).

        Args:
            folder: the checkpoint folder.
            backend: ``"cpu"`` or ``"cuda"``.
            threads: CPU threads per session call; 0 = the CPUs this process may use.
            device: CUDA device ordinal.
            load_tokenizer: load tokenizer.json when present.
            arena_block_bytes: CUDA arena block size; 0 = the library's default.

        Raises:
            SpeclaIOError, FormatError, UnsupportedError, ShapeError, BackendUnavailableError, ...
        """
        if backend not in _BACKENDS:
            raise InvalidArgumentError(f"backend must be 'cpu' or 'cuda', not {backend!r}")
        params = _capi.default_params(_capi.specla_model_params)
        params.backend = _BACKENDS[backend]
        params.device = device
        params.n_threads = threads
        params.arena_block_bytes = arena_block_bytes
        params.load_tokenizer = load_tokenizer
        out = _capi.specla_model_p()
        check(_capi.lib.specla_model_load(encode_path(folder, "folder"), ctypes.byref(params),
                                        ctypes.byref(out)))
        return cls(out.value, os.fspath(folder))

    # ---- lifetime ----
    def close(self) -> None:
        """Release the model (deferred until its sessions, drafters and tokenizer are closed)."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.info.num_parameters} parameters"
        return f"<specla.Model {self.folder!r} {state}>"

    # ---- what it is ----
    @property
    def info(self) -> ModelInfo:
        """The model's shape and special tokens (read at load: the model is immutable)."""
        return self._info

    def memory_stats(self) -> MemoryStats:
        """Memory held now by the model's backend."""
        raw = _capi.specla_memory_stats()
        check(_capi.lib.specla_model_memory_stats(self._handle.ptr(), ctypes.byref(raw)))
        return MemoryStats(**_capi.info_values(raw))

    @property
    def tokenizer(self) -> "Tokenizer":
        """The model's own tokenizer (StateError when the folder had none or it was not loaded).

        It is borrowed from the library's model: usable while that lives (after :meth:`close`,
        as long as sessions or drafters of the model are open)."""
        if self._tokenizer is None:
            from .tokenizer import Tokenizer
            self._tokenizer = Tokenizer.from_model(self)
        return self._tokenizer


def has_cuda() -> bool:
    """Whether the loaded libspecla contains the CUDA backend (see ``specla_has_cuda``)."""
    return bool(_capi.lib.specla_has_cuda())
