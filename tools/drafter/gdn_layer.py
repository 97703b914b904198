"""One Gated DeltaNet decoder block (fla `gated_deltanet`, lib/backend/cpu/gdn_math.md), split
into the pieces that the target (whole sequences), the drafter's training (unrolled branches) and
the fixture writer (token by token) combine differently. Parameter names follow fla, so that
`state_dict()` keys are the checkpoint's `model.layers.{i}.` names without the prefix."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import GDNConfig
from . import delta_rule


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@dataclass
class LayerState:
    """A sequence's state in one block: the last W-1 pre-conv inputs of q, k, v (oldest first) and
    the delta-rule state [B, HV, K, V]."""

    conv_q: torch.Tensor
    conv_k: torch.Tensor
    conv_v: torch.Tensor
    S: torch.Tensor


@dataclass
class Projections:
    """The per-row projections of the normalised block input: pre-conv q, k, v and a, b, z."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    z: torch.Tensor | None


@dataclass
class Heads:
    """Delta-rule inputs per value head: q, k normalised, scaled, expanded; v; log decay g; beta."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor


class GatedDeltaNetAttn(nn.Module):
    def __init__(self, cfg: GDNConfig) -> None:
        super().__init__()
        d, kd, vd, hv, w = cfg.hidden_size, cfg.key_dim, cfg.value_dim, cfg.num_v_heads, cfg.conv_size
        self.q_proj = nn.Linear(d, kd, bias=False)
        self.k_proj = nn.Linear(d, kd, bias=False)
        self.v_proj = nn.Linear(d, vd, bias=False)
        self.a_proj = nn.Linear(d, hv, bias=False)
        self.b_proj = nn.Linear(d, hv, bias=False)
        self.A_log = nn.Parameter(torch.zeros(hv))
        self.dt_bias = nn.Parameter(torch.zeros(hv))
        if cfg.use_short_conv:
            self.q_conv1d = nn.Module()
            self.q_conv1d.weight = nn.Parameter(torch.zeros(kd, 1, w))
            self.k_conv1d = nn.Module()
            self.k_conv1d.weight = nn.Parameter(torch.zeros(kd, 1, w))
            self.v_conv1d = nn.Module()
            self.v_conv1d.weight = nn.Parameter(torch.zeros(vd, 1, w))
        if cfg.use_gate:
            self.g_proj = nn.Linear(d, vd, bias=False)
        self.o_norm = nn.Module()
        self.o_norm.weight = nn.Parameter(torch.ones(cfg.head_v_dim))
        self.o_proj = nn.Linear(vd, d, bias=False)


class SwiGLU(nn.Module):
    def __init__(self, cfg: GDNConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class GDNBlock(nn.Module):
    def __init__(self, cfg: GDNConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.attn_norm = nn.Module()
        self.attn_norm.weight = nn.Parameter(torch.ones(cfg.hidden_size))
        self.attn = GatedDeltaNetAttn(cfg)
        self.mlp_norm = nn.Module()
        self.mlp_norm.weight = nn.Parameter(torch.ones(cfg.hidden_size))
        self.mlp = SwiGLU(cfg)

    # ---- pieces --------------------------------------------------------------------------------
    def zero_state(self, batch: int, device: torch.device | str = "cpu") -> LayerState:
        c = self.cfg
        w1 = max(c.conv_size - 1, 0)
        z = lambda n: torch.zeros(batch, w1, n, device=device)  # noqa: E731
        return LayerState(z(c.key_dim), z(c.key_dim), z(c.value_dim),
                          torch.zeros(batch, c.num_v_heads, c.head_dim, c.head_v_dim, device=device))

    def project(self, h: torch.Tensor) -> Projections:
        """h [..., D] (the block input) -> projections of rmsnorm(h, attn_norm)."""
        x = rmsnorm(h, self.attn_norm.weight, self.cfg.norm_eps)
        at = self.attn
        return Projections(at.q_proj(x), at.k_proj(x), at.v_proj(x), at.a_proj(x), at.b_proj(x),
                           at.g_proj(x) if self.cfg.use_gate else None)

    def conv_weight(self, which: str) -> torch.Tensor:
        return getattr(self.attn, f"{which}_conv1d").weight

    def conv_seq(self, x: torch.Tensor, cache: torch.Tensor, which: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Causal depthwise conv + SiLU over x [B, T, C] after `cache` [B, W-1, C] (oldest first).
        Returns (activations [B, T, C], new cache)."""
        if not self.cfg.use_short_conv:
            return F.silu(x), cache
        w = self.conv_weight(which)
        full = torch.cat([cache, x], dim=1)
        y = F.conv1d(full.transpose(1, 2), w, groups=w.shape[0]).transpose(1, 2)
        return F.silu(y), full[:, full.shape[1] - cache.shape[1]:]

    def conv_window(self, window: list[torch.Tensor], which: str) -> torch.Tensor:
        """Conv + SiLU of one row from its explicit window of W pre-conv inputs [.., C], oldest
        first (the drafter's branches take theirs along their own path)."""
        if not self.cfg.use_short_conv:
            return F.silu(window[-1])
        w = self.conv_weight(which)[:, 0, :]  # [C, W]
        return F.silu(sum(w[:, j] * window[j] for j in range(len(window))))

    def heads(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> Heads:
        """Post-conv q, k, v [..., channels] and a, b [..., HV] -> per-value-head delta-rule inputs."""
        c = self.cfg
        lead = q.shape[:-1]
        q = q.reshape(lead + (c.num_heads, c.head_dim))
        k = k.reshape(lead + (c.num_heads, c.head_dim))
        q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6) * c.head_dim ** -0.5
        k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
        rep = c.num_v_heads // c.num_heads
        if rep > 1:  # value head hv reads query/key head hv // rep
            q = q.repeat_interleave(rep, dim=-2)
            k = k.repeat_interleave(rep, dim=-2)
        beta = torch.sigmoid(b.float())
        if c.allow_neg_eigval:
            beta = beta * 2.0
        g = -torch.exp(self.attn.A_log.float()) * F.softplus(a.float() + self.attn.dt_bias.float())
        return Heads(q, k, v.reshape(lead + (c.num_v_heads, c.head_v_dim)), g, beta)

    def finish(self, h: torch.Tensor, o: torch.Tensor, z: torch.Tensor | None) -> torch.Tensor:
        """Head outputs o [..., HV, V] -> block output: gated norm, o_proj, residual, MLP."""
        c = self.cfg
        y = rmsnorm(o, self.attn.o_norm.weight, c.norm_eps)
        if z is not None:
            y = y * F.silu(z.reshape(y.shape))
        h = h + self.attn.o_proj(y.flatten(-2))
        return h + self.mlp(rmsnorm(h, self.mlp_norm.weight, c.norm_eps))

    # ---- whole rows ----------------------------------------------------------------------------
    def forward_seq(
        self, h: torch.Tensor, state: LayerState, mode: str = "chunk", chunk: int = 64
    ) -> tuple[torch.Tensor, LayerState, delta_rule.ChainMemory | None]:
        """h [B, T, D] after `state`: returns (block output, new state, chain memory (chunk mode))."""
        p = self.project(h)
        q, cq = self.conv_seq(p.q, state.conv_q, "q")
        k, ck = self.conv_seq(p.k, state.conv_k, "k")
        v, cv = self.conv_seq(p.v, state.conv_v, "v")
        hd = self.heads(q, k, v, p.a, p.b)
        mem = None
        if mode == "chunk":
            o, S, mem = delta_rule.chunked(state.S, hd.q, hd.k, hd.v, hd.g, hd.beta, chunk)
        elif mode == "recurrent":
            o, S = delta_rule.recurrent(state.S, hd.q, hd.k, hd.v, hd.g, hd.beta)
        else:
            raise ValueError(f"mode {mode!r}: expected 'chunk' or 'recurrent'")
        return self.finish(h, o, p.z), LayerState(cq, ck, cv, S), mem
