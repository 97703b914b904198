"""``verify_tree``: the verification primitive over NumPy arrays, for callers with their own
drafter (``specla_session_verify_tree``)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional

import numpy as np

from . import _capi
from ._arrays import TokenIds, as_token_array, check_out_array
from ._params import TREE_ALGORITHMS, sampling_params
from .errors import InvalidArgumentError, check

if TYPE_CHECKING:
    from .session import Session


@dataclass(frozen=True)
class VerifyResult:
    """What one verification accepted.

    Attributes:
        accepted: int32 array of accepted node indices, root to leaf.
        bonus_token: the target's next token after them (fed at the next call).
        logits: float32 ``(n_nodes, vocab_size)``: the target's logits after every node
            (written by the library straight into this array), or None.
    """
    accepted: np.ndarray
    bonus_token: int
    logits: Optional[np.ndarray]


def verify_tree(session: "Session", tokens: TokenIds, parents: TokenIds, *,
                draft_dists: Optional[np.ndarray] = None, temperature: float = 0.0,
                top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                deferred_commit: bool = True, tree_algorithm: str = "auto",
                want_logits: bool = True,
                out_logits: Optional[np.ndarray] = None) -> VerifyResult:
    """Verify a draft tree against the session's context and commit the accepted path.

    Args:
        tokens: int32-convertible ``(n_nodes,)`` candidate tokens in topological order.
        parents: ``(n_nodes,)``: ``parents[i] < i`` is node i's parent, -1 for a candidate of
            the first position after the context (a chain: -1, 0, 1, ...).
        draft_dists: float32 ``(n_nodes, vocab_size)``, row i the drafter distribution node i's
            token was drawn from; None when the candidates were chosen deterministically.
            Passed without a copy when already float32 and C-contiguous.
        temperature, top_k, top_p, seed: how acceptance samples (seed: this call's stream).
        deferred_commit: apply the accepted factors inside the next pass.
        tree_algorithm: how the tree pass runs: "auto" (the backend picks), "hybrid" or
            "parallel_wy".
        want_logits: return the node logits.
        out_logits: a preallocated float32 ``(n_nodes, vocab_size)`` array to write them into
            (implies ``want_logits``); otherwise one is allocated.

    Afterwards the session's context holds the accepted tokens followed by ``bonus_token``.
    """
    tok = as_token_array(tokens, "tokens")
    par = as_token_array(parents, "parents")
    if tok.shape != par.shape:
        raise InvalidArgumentError(f"parents: {par.size} entries for {tok.size} tokens")
    n = tok.size
    vocab = session.model.info.vocab_size
    dists_p = None
    if draft_dists is not None:
        dists = np.ascontiguousarray(draft_dists, dtype=np.float32)
        if dists.shape != (n, vocab):
            raise InvalidArgumentError(
                f"draft_dists: expected shape ({n}, {vocab}), got {dists.shape}")
        dists_p = dists.ctypes.data_as(_capi.c_float_p)
    logits: Optional[np.ndarray] = None
    if out_logits is not None:
        logits = check_out_array(out_logits, (n, vocab), "out_logits")
    elif want_logits:
        logits = np.empty((n, vocab), dtype=np.float32)

    keep: List[object] = []
    sampling = sampling_params(keep, temperature=temperature, top_k=top_k, top_p=top_p,
                               seed=seed)
    params = _capi.default_params(_capi.specla_verify_params)
    params.sampling = ctypes.pointer(sampling)
    params.deferred_commit = bool(deferred_commit)
    if tree_algorithm not in TREE_ALGORITHMS:
        raise InvalidArgumentError(f"tree_algorithm must be one of {sorted(TREE_ALGORITHMS)}, "
                                   f"not {tree_algorithm!r}")
    params.tree_algorithm = TREE_ALGORITHMS[tree_algorithm]
    accepted = np.empty(max(n, 1), dtype=np.int32)
    n_accepted = ctypes.c_size_t()
    bonus = ctypes.c_int32()
    with session._handle.use() as ptr:
        check(_capi.lib.specla_session_verify_tree(
            ptr, tok.ctypes.data_as(_capi.c_int32_p) if n else None,
            par.ctypes.data_as(_capi.c_int32_p) if n else None, n, dists_p, ctypes.byref(params),
            accepted.ctypes.data_as(_capi.c_int32_p),
            ctypes.byref(n_accepted), ctypes.byref(bonus),
            logits.ctypes.data_as(_capi.c_float_p) if logits is not None and n else None))
    return VerifyResult(accepted[:n_accepted.value], bonus.value, logits)
