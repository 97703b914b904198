"""The gated delta rule of lib/backend/cpu/gdn_math.md, token by token and in the chunk (WY) form.

Layout here: q, k [B, T, HV, K] (already normalised, scaled and expanded to value heads), v
[B, T, HV, V], g (log decay) and beta [B, T, HV], state S [B, HV, K, V] (fla's fixtures store it
transposed, [HV, V, K]). All in float32.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def recurrent_step(
    S: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token ([B, HV, *] inputs): returns (o [B, HV, V], new S), in gdn_math.md's order."""
    S = torch.exp(g)[..., None, None] * S
    u = beta[..., None] * (v - torch.einsum("bhkv,bhk->bhv", S, k))
    S = S + k[..., :, None] * u[..., None, :]
    return torch.einsum("bhkv,bhk->bhv", S, q), S


def recurrent(
    S: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The token loop over [B, T, ...] inputs: returns (o [B, T, HV, V], final S)."""
    outs = []
    for t in range(q.shape[1]):
        o, S = recurrent_step(S, q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t])
        outs.append(o)
    return torch.stack(outs, dim=1), S


@dataclass
class ChainMemory:
    """What a chunked pass over a chain keeps so that the state after any chain position can be
    applied to new vectors without materialising per-position states (the drafter's unrolled
    training and its depth-d evaluation use this). Chunked layout [B, HV, N, C, ...]."""

    k: torch.Tensor  # [B, HV, N, C, K]
    gam: torch.Tensor  # [B, HV, N, C] cumulative log decay within each chunk
    vt: torch.Tensor  # [B, HV, N, C, V] delta residuals (the recurrence's u_t)
    s_start: torch.Tensor  # [B, HV, N, K, V] state entering each chunk
    decay_mask: torch.Tensor  # [B, HV, N, C, C] exp(gam_i - gam_j) for i >= j, else 0
    length: int

    def query(self, x: torch.Tensor) -> torch.Tensor:
        """For x [B, T, HV, K]: out[:, t] = S_t^T x[:, t], S_t = state after chain position t
        (inclusive). Returns [B, T, HV, V]."""
        xc = _to_chunks(x, self.k.shape[3])
        inter = torch.exp(self.gam)[..., None] * (xc @ self.s_start)
        intra = ((xc @ self.k.transpose(-1, -2)) * self.decay_mask) @ self.vt
        return _from_chunks(inter + intra, self.length)


def _to_chunks(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """[B, T, HV, *rest] -> [B, HV, N, C, *rest], zero-padded at the end."""
    b, t = x.shape[:2]
    n = -(-t // chunk)
    pad = n * chunk - t
    if pad:
        x = torch.cat([x, x.new_zeros((b, pad) + tuple(x.shape[2:]))], dim=1)
    x = x.reshape((b, n, chunk) + tuple(x.shape[2:]))
    return x.movedim(3, 1)


def _from_chunks(x: torch.Tensor, length: int) -> torch.Tensor:
    """[B, HV, N, C, *rest] -> [B, T, HV, *rest]."""
    x = x.movedim(1, 3)
    b, n, c = x.shape[:3]
    return x.reshape((b, n * c) + tuple(x.shape[3:]))[:, :length]


def chunked(
    S: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    chunk: int = 64,
) -> tuple[torch.Tensor, torch.Tensor, ChainMemory]:
    """The chunk / WY form of gdn_math.md, section 3 (mathematically the token loop). The
    intra-chunk work is batched over all chunks; only the state hand-over loops. Returns (o,
    final S, memory)."""
    length = q.shape[1]
    qc, kc, vc = (_to_chunks(x, chunk) for x in (q, k, v))
    gc, bc = _to_chunks(g, chunk), _to_chunks(beta, chunk)  # padding: g = 0, beta = 0: no-ops
    gam = torch.cumsum(gc, dim=-1)
    c = gam.shape[-1]
    diff = gam[..., :, None] - gam[..., None, :]
    incl = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    strict = incl.clone().fill_diagonal_(False)
    # Mask before exp: above the diagonal gam_i - gam_j > 0 and may overflow.
    decay_mask = torch.exp(diff.masked_fill(~incl, float("-inf")))
    a = bc[..., :, None] * (kc @ kc.transpose(-1, -2)) * decay_mask * strict
    eye = torch.eye(c, dtype=q.dtype, device=q.device)
    lhs = eye + a
    w = torch.linalg.solve_triangular(lhs, (bc * torch.exp(gam))[..., None] * kc, upper=False, unitriangular=True)
    u = torch.linalg.solve_triangular(lhs, bc[..., None] * vc, upper=False, unitriangular=True)
    tail = torch.exp(gam[..., -1:] - gam)[..., None] * kc  # exp(gam_C - gam_t) k_t
    last = torch.exp(gam[..., -1])[..., None, None]
    starts, vts = [], []
    for n in range(qc.shape[2]):
        starts.append(S)
        vt = u[:, :, n] - w[:, :, n] @ S
        vts.append(vt)
        S = last[:, :, n] * S + tail[:, :, n].transpose(-1, -2) @ vt
    s_start = torch.stack(starts, dim=2)
    vt = torch.stack(vts, dim=2)
    mem = ChainMemory(k=kc, gam=gam, vt=vt, s_start=s_start, decay_mask=decay_mask, length=length)
    o = torch.exp(gam)[..., None] * (qc @ s_start) + ((qc @ kc.transpose(-1, -2)) * decay_mask) @ vt
    return _from_chunks(o, length), S, mem
