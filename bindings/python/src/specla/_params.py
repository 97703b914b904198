"""Filling the C parameter structs from Python values, with range checks ctypes does not do
(assigning 2**40 to a ``c_int32`` field silently wraps; here it is an InvalidArgumentError)."""
from __future__ import annotations

import ctypes
import math

from . import _capi
from .errors import InvalidArgumentError

# specla_tree_algorithm by name (SpecOptions.tree_algorithm, verify_tree's tree_algorithm).
TREE_ALGORITHMS = {"auto": _capi.SPECLA_TREE_AUTO, "hybrid": _capi.SPECLA_TREE_HYBRID,
                   "parallel_wy": _capi.SPECLA_TREE_PARALLEL_WY}


def assign(struct: ctypes.Structure, field: str, value: object, what: str | None = None) -> None:
    """Set ``struct.field = value``, refusing what the C type cannot hold exactly."""
    name = what or field
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        current = getattr(struct, field)
        if isinstance(current, bool) and isinstance(value, bool):
            setattr(struct, field, value)
            return
        raise InvalidArgumentError(f"{name} must be a number, not {type(value).__name__}")
    current = getattr(struct, field)
    if isinstance(current, int):
        if not isinstance(value, int):
            raise InvalidArgumentError(f"{name} must be an integer, not {value!r}")
        setattr(struct, field, value)
        if getattr(struct, field) != value:
            raise InvalidArgumentError(f"{name} = {value} is outside the range of its C type")
        return
    # A C float: the library checks finiteness and ranges and names the field.
    setattr(struct, field, float(value))
    if math.isfinite(value) and not math.isfinite(getattr(struct, field)):
        raise InvalidArgumentError(f"{name} = {value} overflows a C float")
