"""Filling the C parameter structs from Python values, with range checks ctypes does not do
(assigning 2**40 to a ``c_int32`` field silently wraps; here it is an InvalidArgumentError)."""
from __future__ import annotations

import ctypes
import math
import numbers
from collections.abc import Mapping
from typing import List, Optional

from . import _capi
from .errors import InvalidArgumentError

# specla_tree_algorithm by name (SpecOptions.tree_algorithm, verify_tree's tree_algorithm).
TREE_ALGORITHMS = {"auto": _capi.SPECLA_TREE_AUTO, "hybrid": _capi.SPECLA_TREE_HYBRID,
                   "parallel_wy": _capi.SPECLA_TREE_PARALLEL_WY}
# specla_tree_shape by name (SpecOptions.tree_shape).
TREE_SHAPES = {"auto": _capi.SPECLA_TREE_SHAPE_AUTO, "dynamic": _capi.SPECLA_TREE_SHAPE_DYNAMIC,
               "fixed_width": _capi.SPECLA_TREE_SHAPE_FIXED_WIDTH}


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


# The library's defaults of the penalty fields (specla_sampling_params_init): penalties off.
DEFAULT_REPETITION_PENALTY = 1.0
DEFAULT_PENALTY_LAST_N = 64


def sampling_params(keep: List[object], *, temperature: float = 0.0, top_k: int = 0,
                    top_p: float = 1.0, seed: Optional[int] = 0,
                    repetition_penalty: float = DEFAULT_REPETITION_PENALTY,
                    presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                    penalty_last_n: int = DEFAULT_PENALTY_LAST_N, min_p: float = 0.0,
                    logit_bias: Optional[Mapping] = None) -> _capi.specla_sampling_params:
    """A ``specla_sampling_params`` from Python values. The library checks the ranges (naming
    the field); here only what ctypes cannot hold. The logit bias array it points to is
    appended to ``keep``, which must live as long as the struct is used (as the stop strings
    live with a generation request)."""
    sampling = _capi.default_params(_capi.specla_sampling_params)
    assign(sampling, "temperature", temperature)
    assign(sampling, "top_k", top_k)
    assign(sampling, "top_p", top_p)
    # None: a seed drawn by the library at the start of the generation (SPECLA_SEED_RANDOM),
    # reported back as GenerationResult.seed.
    assign(sampling, "seed", _capi.SPECLA_SEED_RANDOM if seed is None else seed)
    assign(sampling, "repetition_penalty", repetition_penalty)
    assign(sampling, "presence_penalty", presence_penalty)
    assign(sampling, "frequency_penalty", frequency_penalty)
    assign(sampling, "penalty_last_n", penalty_last_n)
    assign(sampling, "min_p", min_p)
    if logit_bias is not None:
        entries = _logit_bias_array(logit_bias)
        if len(entries):
            keep.append(entries)
            sampling.logit_bias = ctypes.cast(entries, ctypes.POINTER(_capi.specla_logit_bias))
            sampling.n_logit_bias = len(entries)
    return sampling


def _logit_bias_array(logit_bias: Mapping) -> ctypes.Array:
    """The entries of a {token id: bias} mapping as a C array of ``specla_logit_bias``."""
    if not isinstance(logit_bias, Mapping):
        raise InvalidArgumentError("logit_bias must be a mapping of token id to bias, not "
                                   f"{type(logit_bias).__name__}")
    entries = (_capi.specla_logit_bias * len(logit_bias))()
    for i, (token, bias) in enumerate(logit_bias.items()):
        # NumPy's integers and floats too: ids often come out of an array.
        if isinstance(token, bool) or not isinstance(token, numbers.Integral):
            raise InvalidArgumentError(f"logit_bias: token ids must be integers, not {token!r}")
        token = int(token)
        if isinstance(bias, numbers.Real) and not isinstance(bias, bool):
            bias = float(bias)
        assign(entries[i], "token", token, f"logit_bias token {token}")
        assign(entries[i], "bias", bias, f"logit_bias[{token}]")
    return entries
