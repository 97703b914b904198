"""SpecLA for Python: Gated DeltaNet inference with lossless speculative decoding.

A thin, typed layer over libspecla's C ABI (through ctypes: no compiled extension module)::

    import specla
    model = specla.Model.load("models/gdn-pycode-22m")
    session = specla.Session(model)
    print(specla.generate(session, "def fib(n):", max_tokens=64).text)

Thread safety is the C ABI's: a model (and a tokenizer) may be shared by any number of threads;
a session and a drafter are used by one thread at a time (enforced: a second thread gets a
StateError). Library calls release the GIL, so sessions on different threads run in parallel.
"""
from __future__ import annotations

from . import _capi
from .drafter import Drafter
from .errors import (AbortedError, BackendUnavailableError, CapacityError, DeviceError,
                     FormatError, InternalError, InvalidArgumentError, ShapeError,
                     SpeclaError, SpeclaIOError, SpeclaMemoryError, StateError,
                     TokenOutOfRangeError, UnsupportedError)
from .generation import (GenerationResult, SpecOptions, SpecStats, TextStream, TokenLogprob,
                         generate, stream)
from .model import MemoryStats, Model, ModelInfo, has_cuda
from .session import Session, SessionMemory
from .tokenizer import StreamDecoder, Tokenizer, TokenizerInfo
from .verify import VerifyResult, verify_tree

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the libspecla actually loaded ("major.minor.patch")."""
    return _capi.lib.specla_version().decode()


def library_path() -> str:
    """The path libspecla was loaded from."""
    return _capi.library_path()


__all__ = [
    "Model", "ModelInfo", "MemoryStats", "Session", "SessionMemory", "Tokenizer", "TokenizerInfo",
    "StreamDecoder", "Drafter", "generate", "stream", "TextStream", "GenerationResult",
    "TokenLogprob", "SpecOptions", "SpecStats", "verify_tree", "VerifyResult", "has_cuda", "library_version",
    "library_path",
    "SpeclaError", "InvalidArgumentError", "SpeclaIOError", "FormatError", "UnsupportedError",
    "ShapeError", "TokenOutOfRangeError", "SpeclaMemoryError", "BackendUnavailableError",
    "DeviceError", "AbortedError", "CapacityError", "StateError", "InternalError",
]
