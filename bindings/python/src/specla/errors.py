"""Exceptions: one class per ``specla_status``, all derived from :class:`SpeclaError`.

Every failing library call raises the class of its status, carrying the status code and the
library's message (``specla_last_error()``, read on the calling thread right after the call, as
the C ABI requires). Where a status has an obvious built-in counterpart the class derives from it
too, so ``except ValueError`` or ``except OSError`` works as a Python user expects.
"""
from __future__ import annotations

from . import _capi


class SpeclaError(Exception):
    """A call into libspecla failed.

    Attributes:
        status: the ``specla_status`` code (an ``int``, ``SPECLA_ERR_*`` of the header).
        status_name: the library's name of it, e.g. ``"SPECLA_ERR_IO: input/output error"``.
        message: the library's message naming the file, field or parameter at fault.
    """

    status: int = -1

    def __init__(self, message: str, status: int | None = None) -> None:
        if status is not None:
            self.status = status
        self.message = message
        raw = _capi.lib.specla_status_string(self.status) if self.status >= 0 else None
        self.status_name = raw.decode() if raw else ""
        super().__init__(f"{message} [{self.status_name}]" if self.status_name else message)


class InvalidArgumentError(SpeclaError, ValueError):
    """A bad parameter, a NULL handle or a zero length (SPECLA_ERR_INVALID_ARGUMENT)."""
    status = _capi.SPECLA_ERR_INVALID_ARGUMENT


class SpeclaIOError(SpeclaError, OSError):
    """A file or folder is missing or cannot be read (SPECLA_ERR_IO)."""
    status = _capi.SPECLA_ERR_IO

    def __init__(self, message: str, status: int | None = None) -> None:
        SpeclaError.__init__(self, message, status)


class FormatError(SpeclaError, ValueError):
    """A malformed file: JSON, safetensors header, tensor data (SPECLA_ERR_FORMAT)."""
    status = _capi.SPECLA_ERR_FORMAT


class UnsupportedError(SpeclaError):
    """Well-formed but not something the engine runs (SPECLA_ERR_UNSUPPORTED)."""
    status = _capi.SPECLA_ERR_UNSUPPORTED


class ShapeError(SpeclaError, ValueError):
    """A tensor is missing or has the wrong shape or dtype (SPECLA_ERR_SHAPE)."""
    status = _capi.SPECLA_ERR_SHAPE


class TokenOutOfRangeError(SpeclaError, ValueError):
    """A token id outside [0, vocab_size) (SPECLA_ERR_TOKEN_OUT_OF_RANGE)."""
    status = _capi.SPECLA_ERR_TOKEN_OUT_OF_RANGE


class SpeclaMemoryError(SpeclaError, MemoryError):
    """Host or device memory exhausted; nothing was changed (SPECLA_ERR_OUT_OF_MEMORY)."""
    status = _capi.SPECLA_ERR_OUT_OF_MEMORY


class BackendUnavailableError(SpeclaError):
    """The backend is not built in, its module or libraries are missing, or no device
    (SPECLA_ERR_BACKEND_UNAVAILABLE)."""
    status = _capi.SPECLA_ERR_BACKEND_UNAVAILABLE


class DeviceError(SpeclaError):
    """The GPU runtime reported an error (SPECLA_ERR_DEVICE)."""
    status = _capi.SPECLA_ERR_DEVICE


class AbortedError(SpeclaError):
    """A callback asked to stop (SPECLA_ERR_ABORTED)."""
    status = _capi.SPECLA_ERR_ABORTED


class CapacityError(SpeclaError):
    """An output buffer is too small (SPECLA_ERR_CAPACITY)."""
    status = _capi.SPECLA_ERR_CAPACITY


class StateError(SpeclaError):
    """The call is not valid in the handle's current state (SPECLA_ERR_STATE); also raised by
    the package for a handle that is closed or in use by another thread."""
    status = _capi.SPECLA_ERR_STATE


class InternalError(SpeclaError):
    """A bug in the library (SPECLA_ERR_INTERNAL): please report it with the message."""
    status = _capi.SPECLA_ERR_INTERNAL


_BY_STATUS: dict[int, type[SpeclaError]] = {
    cls.status: cls
    for cls in (InvalidArgumentError, SpeclaIOError, FormatError, UnsupportedError, ShapeError,
                TokenOutOfRangeError, SpeclaMemoryError, BackendUnavailableError, DeviceError,
                AbortedError, CapacityError, StateError, InternalError)
}


def error_for(status: int, message: str | None = None) -> SpeclaError:
    """The exception for a status; ``message`` defaults to this thread's ``specla_last_error()``."""
    if message is None:
        raw = _capi.lib.specla_last_error()
        message = raw.decode("utf-8", "replace") if raw else ""
    cls = _BY_STATUS.get(status)
    if cls is None:  # a status newer than this package
        return SpeclaError(message, status)
    return cls(message)


def check(status: int) -> None:
    """Raise the exception of a failed status (call right after the library call)."""
    if status != _capi.SPECLA_OK:
        raise error_for(status)
