"""NumPy conversions shared by the modules: token ids in, float buffers out."""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from .errors import InvalidArgumentError

TokenIds = Union[Sequence[int], np.ndarray]


def as_token_array(tokens: TokenIds, what: str = "tokens") -> np.ndarray:
    """A C-contiguous int32 array of token ids (no copy when it already is one).

    Values outside int32 are refused here: a silent wrap-around would pass a different id.
    """
    if isinstance(tokens, np.ndarray):
        arr = tokens
    else:
        arr = np.asarray(list(tokens) if not isinstance(tokens, (list, tuple)) else tokens)
    if arr.size == 0:
        return np.empty(0, dtype=np.int32)
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{what}: expected a 1-D sequence of ids, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise InvalidArgumentError(f"{what}: expected integer ids, got dtype {arr.dtype}")
    if arr.dtype != np.int32:
        info = np.iinfo(np.int32)
        if arr.min() < info.min or arr.max() > info.max:
            raise InvalidArgumentError(f"{what}: an id does not fit int32")
        arr = arr.astype(np.int32)
    return np.ascontiguousarray(arr)


def check_out_array(out: np.ndarray, shape: tuple, what: str) -> np.ndarray:
    """Validate a caller-supplied float32 output buffer: written in place, never copied."""
    if not isinstance(out, np.ndarray):
        raise InvalidArgumentError(f"{what}: expected a numpy.ndarray")
    if out.dtype != np.float32:
        raise InvalidArgumentError(f"{what}: expected dtype float32, got {out.dtype}")
    if out.shape != shape:
        raise InvalidArgumentError(f"{what}: expected shape {shape}, got {out.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise InvalidArgumentError(f"{what}: must be C-contiguous and writeable")
    return out
