"""The EAGLE-style drafter of lib/spec/eagle_drafter.md: fc over concat(embedding, feature), one
Gated DeltaNet block with its own state, and the target's final norm + lm_head (shared, frozen).

Three ways to run it:
* `chain`: a parallel pass over rows (row r: token x_{r+1}, feature f_r), the catch-up and the
  first level of training;
* `unroll`: depth-d drafts from every chain position at once, exactly as inference runs them
  (the state after the true chain up to the branch point, then the branch's own rows with the
  drafter's predicted features), for the training-time test and the depth-d evaluation;
* `step` / `evaluate_tree`: row by row on an explicit state (the fixture writer; the reference the
  tests hold `unroll` to).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from . import delta_rule
from .checkpoint import load_tensors, take
from .config import GDNConfig
from .gdn_layer import GDNBlock, LayerState
from .gdn_torch import GDNModel

FORMAT_VERSION = 1
# The fla config fields a drafter's config.json carries for its layer (the rest are the target's).
LAYER_FIELDS = ("hidden_size", "num_heads", "num_v_heads", "head_dim", "expand_v", "conv_size",
                "use_short_conv", "use_gate", "allow_neg_eigval", "hidden_ratio", "intermediate_size",
                "norm_eps", "vocab_size")


@dataclass
class DraftOutput:
    features: torch.Tensor  # [B, R, D] predicted next feature per row
    logits: torch.Tensor  # [B, R, vocab]


@dataclass
class _Level:
    """What later unrolled levels read from a level: pre-conv q, k, v per row and the branch
    factors (k, u, g) of the level's nodes."""

    pre: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    k: torch.Tensor | None = None
    u: torch.Tensor | None = None
    g: torch.Tensor | None = None


def shift(x: torch.Tensor, m: int) -> torch.Tensor:
    """y[:, r] = x[:, r - m] (zeros for r < m); m < 0 shifts the other way."""
    if m == 0:
        return x
    z = x.new_zeros((x.shape[0], abs(m)) + tuple(x.shape[2:]))
    if m > 0:
        return torch.cat([z, x[:, :-m]], dim=1)
    return torch.cat([x[:, -m:], z], dim=1)


def layer_config_dict(target: GDNConfig, **overrides) -> dict:
    """A drafter layer config: the target's GDN fields (one layer), with `overrides`."""
    cfg = {f: target.raw.get(f) for f in LAYER_FIELDS if f in target.raw}
    cfg.update(overrides)
    return cfg


def drafter_config_dict(layer: dict, target: GDNConfig) -> dict:
    """The drafter folder's config.json: a one-layer fla gated_deltanet config + specla_drafter."""
    cfg = {"model_type": "gated_deltanet", "attn": None, "attnres_block_size": None, "use_l2warp": False}
    cfg.update(layer)
    cfg["num_hidden_layers"] = 1
    cfg["hidden_size"] = target.hidden_size
    cfg["vocab_size"] = target.vocab_size
    cfg["tie_word_embeddings"] = False
    cfg["specla_drafter"] = {
        "kind": "eagle",
        "format_version": FORMAT_VERSION,
        "feature_layer": -1,
        "target_hidden_size": target.hidden_size,
        "target_vocab_size": target.vocab_size,
        "target_num_hidden_layers": target.num_hidden_layers,
    }
    return cfg


class EagleDrafter(nn.Module):
    def __init__(self, config: dict, target: GDNModel) -> None:
        super().__init__()
        self.config = dict(config)
        self.cfg = GDNConfig.from_dict(config, "drafter config")
        if self.cfg.hidden_size != target.cfg.hidden_size or self.cfg.vocab_size != target.cfg.vocab_size:
            raise ValueError("drafter hidden_size / vocab_size must equal the target's")
        d = self.cfg.hidden_size
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.layer = GDNBlock(self.cfg)
        # The target's embedding table, final norm and lm_head: shared and frozen, so kept outside
        # the module's parameters (never saved, never trained).
        object.__setattr__(self, "target", target)

    # ---- folder I/O ----------------------------------------------------------------------------
    def tensors(self) -> dict[str, torch.Tensor]:
        out = {"fc.weight": self.fc.weight}
        out.update({f"model.layers.0.{k}": v for k, v in self.layer.state_dict().items()})
        return {k: v.detach().contiguous() for k, v in out.items()}

    def save(self, folder: str | Path, dtype: torch.dtype = torch.bfloat16) -> None:
        """config.json + model.safetensors (A_log and dt_bias stay F32, as in the target's files)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(self.config, indent=2, sort_keys=True) + "\n")
        keep_f32 = ("A_log", "dt_bias")
        ts = {k: (v.float() if k.endswith(keep_f32) else v.to(dtype)).cpu() for k, v in self.tensors().items()}
        save_file(ts, str(folder / "model.safetensors"), metadata={"format": "pt"})

    @staticmethod
    def from_folder(folder: str | Path, target: GDNModel) -> "EagleDrafter":
        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text())
        meta = config.get("specla_drafter", {})
        for key, want in (("target_hidden_size", target.cfg.hidden_size),
                          ("target_vocab_size", target.cfg.vocab_size),
                          ("target_num_hidden_layers", target.cfg.num_hidden_layers)):
            if meta.get(key) != want:
                raise ValueError(f"{folder}/config.json: specla_drafter.{key} {meta.get(key)} != target's {want}")
        drafter = EagleDrafter(config, target)
        tensors = load_tensors(folder)
        drafter.fc.weight.data.copy_(take(tensors, "fc.weight", tuple(drafter.fc.weight.shape)))
        own = drafter.layer.state_dict()
        drafter.layer.load_state_dict({k: take(tensors, f"model.layers.0.{k}", tuple(v.shape)) for k, v in own.items()})
        return drafter.to(target.embeddings.weight.device)

    # ---- the row function ----------------------------------------------------------------------
    def block_input(self, tokens: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """x0 = fc(concat(embedding of the row's token, the row's input feature))."""
        return self.fc(torch.cat([self.target.embeddings(tokens), features.to(self.fc.weight.dtype)], dim=-1))

    def head(self, features: torch.Tensor) -> torch.Tensor:
        return self.target.head(features)

    def zero_state(self, batch: int) -> LayerState:
        return self.layer.zero_state(batch, self.fc.weight.device)

    def chain(self, tokens: torch.Tensor, features: torch.Tensor, state: LayerState | None = None,
              mode: str = "chunk", chunk: int = 64, with_logits: bool = True) -> tuple[DraftOutput, LayerState]:
        """Rows [B, R] (token x_{r+1}, feature f_r) in one pass after `state` (zero when None)."""
        if state is None:
            state = self.zero_state(tokens.shape[0])
        out, new_state, _ = self.layer.forward_seq(self.block_input(tokens, features), state, mode, chunk)
        return DraftOutput(out, self.head(out) if with_logits else out.new_zeros(0)), new_state

    def step(self, token: torch.Tensor, feature: torch.Tensor, state: LayerState) -> tuple[DraftOutput, LayerState]:
        """One row per sequence (token [B], feature [B, D]) on `state`, token loop form."""
        out, st = self.chain(token[:, None], feature[:, None], state, mode="recurrent")
        return DraftOutput(out.features[:, 0], out.logits[:, 0]), st

    def evaluate_tree(self, tokens: list[int], parents: list[int], root_feature: torch.Tensor,
                      state: LayerState) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A draft tree after `state` (batch 1): node v has token tokens[v], parent parents[v] (-1 =
        first level, topological order) and input feature = its parent's output feature (the
        chain's last output `root_feature` [D] for the first level). Each node is evaluated against
        its own ancestors only, by replaying its root-to-node path from `state`.
        Returns (features_in [N, D], features_out [N, D], logits [N, vocab])."""
        n = len(tokens)
        f_in = torch.zeros(n, root_feature.shape[-1])
        f_out = torch.zeros(n, root_feature.shape[-1])
        logits = torch.zeros(n, self.cfg.vocab_size)
        for v in range(n):
            if parents[v] >= v:
                raise ValueError(f"tree node {v}: parent {parents[v]} is not earlier (topological order)")
            path = []
            u = v
            while u >= 0:
                path.append(u)
                u = parents[u]
            st = state
            for u in reversed(path):
                fin = root_feature if parents[u] < 0 else f_out[parents[u]]
                out, st = self.step(torch.tensor([tokens[u]]), fin[None], st)
            f_in[v] = root_feature if parents[v] < 0 else f_out[parents[v]]
            f_out[v] = out.features[0]
            logits[v] = out.logits[0]
        return f_in, f_out, logits

    # ---- unrolled drafts from every position (training-time test, depth-d evaluation) ----------
    def unroll(self, tokens: torch.Tensor, features: torch.Tensor, depth: int, chunk: int = 64,
               with_logits: bool = True) -> list[DraftOutput]:
        """Chain rows [B, R] from a zero state (row r: token x_{r+1}, true feature f_r), then for
        every row r and level j = 2..depth the depth-j draft node that inference would evaluate at
        r: its path is the chain up to row r-j+1 (true features, committed state), then the
        branch nodes at rows r-j+2, ..., r, each with the true token of its row and, as feature,
        the output of the node before it on the path (the drafter's own prediction). Exact (no
        approximation of the recurrent state): the branch's state is the chain state after row c
        = r-j+1 plus rank-1 updates, and the chain state is only ever applied to vectors, through
        the chunk form's memory (ChainMemory.query). Valid rows of level j: r >= j-1.
        Returns one DraftOutput per level (level 1 = the chain)."""
        lay = self.layer
        h = self.block_input(tokens, features)
        p = lay.project(h)
        st = self.zero_state(tokens.shape[0])
        q, _ = lay.conv_seq(p.q, st.conv_q, "q")
        k, _ = lay.conv_seq(p.k, st.conv_k, "k")
        v, _ = lay.conv_seq(p.v, st.conv_v, "v")
        hd = lay.heads(q, k, v, p.a, p.b)
        o, _, mem = delta_rule.chunked(st.S, hd.q, hd.k, hd.v, hd.g, hd.beta, chunk)
        out = lay.finish(h, o, p.z)
        results = [DraftOutput(out, self.head(out) if with_logits else out.new_zeros(0))]
        levels = [_Level(pre=(p.q, p.k, p.v))]
        w = self.cfg.conv_size
        for j in range(2, depth + 1):
            h = self.block_input(tokens, shift(results[-1].features, 1))
            p = lay.project(h)
            pre = (p.q, p.k, p.v)
            # Conv window along the node's path: the input at lag m (m = 0: the node itself) is on
            # row r - m, from level j - m while that is a branch level, else from the chain.
            post = []
            for c, which in enumerate("qkv"):
                window = [shift(pre[c] if m == 0 else levels[max(j - m, 1) - 1].pre[c], m)
                          for m in range(w - 1, -1, -1)]
                post.append(lay.conv_window(window, which))
            hd = lay.heads(post[0], post[1], post[2], p.a, p.b)
            lag = j - 1  # the branch point: chain row r - lag

            def through_path(x: torch.Tensor) -> torch.Tensor:
                # S_{b_{j-1}}^T x: the chain state after row r - lag, then the path's earlier
                # branch nodes (level i at row r - (j - i)): S <- exp(g) S + k u^T.
                acc = shift(mem.query(shift(x, -lag)), lag)
                for i in range(2, j):
                    lv = levels[i - 1]
                    ki, ui, gi = (shift(t, j - i) for t in (lv.k, lv.u, lv.g))
                    acc = torch.exp(gi)[..., None] * acc + (ki * x).sum(-1, keepdim=True) * ui
                return acc

            decay = torch.exp(hd.g)[..., None]
            u = hd.beta[..., None] * (hd.v - decay * through_path(hd.k))
            o = decay * through_path(hd.q) + (hd.k * hd.q).sum(-1, keepdim=True) * u
            out = lay.finish(h, o, p.z)
            results.append(DraftOutput(out, self.head(out) if with_logits else out.new_zeros(0)))
            levels.append(_Level(pre=pre, k=hd.k, u=u, g=hd.g))
        return results


def init_weights(drafter: EagleDrafter, generator: torch.Generator, proj_gain: float = 1.0,
                 out_gain: float = 1.0, norm_jitter: float = 0.0, conv_std: float | None = None) -> None:
    """Random weights in fla's spirit: linear weights N(0, gain^2 / fan_in) (out_gain for o_proj
    and down_proj, which feed the residual), A = U(1, 16) (A_log = log A), dt = logU(1e-3, 1e-1),
    dt_bias = softplus^-1(dt), conv N(0, conv_std^2) (default 1/sqrt(W)), norm weights
    1 + norm_jitter * N(0, 1)."""
    def normal(shape, std):
        return torch.randn(shape, generator=generator) * std

    with torch.no_grad():
        for name, p in list(drafter.named_parameters()):
            leaf = name.rsplit(".", 1)[0]
            if p.dim() == 2:
                gain = out_gain if leaf.endswith(("o_proj", "down_proj")) else proj_gain
                p.copy_(normal(p.shape, gain / math.sqrt(p.shape[1])))
            elif name.endswith("conv1d.weight"):
                p.copy_(normal(p.shape, conv_std if conv_std is not None else 1 / math.sqrt(p.shape[-1])))
            elif name.endswith("A_log"):
                p.copy_(torch.log(1 + 15 * torch.rand(p.shape, generator=generator)))
            elif name.endswith("dt_bias"):
                dt = torch.exp(math.log(1e-3) + torch.rand(p.shape, generator=generator) * (math.log(1e-1) - math.log(1e-3)))
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif name.endswith("norm.weight"):
                p.copy_(1 + norm_jitter * torch.randn(p.shape, generator=generator))
            else:
                raise AssertionError(f"unhandled parameter {name}")


def init_fc_feature_passthrough(drafter: EagleDrafter, generator: torch.Generator, emb_gain: float = 1.0) -> None:
    """fc = [N(0, emb_gain^2 / D) | I]: the block input starts as the input feature plus a random
    projection of the token's embedding, so that before training the drafter already predicts
    (through the shared head) the target's own distribution at its input feature, and learning
    starts from the feature rather than from a random mix of it."""
    d = drafter.cfg.hidden_size
    with torch.no_grad():
        w = torch.randn(d, d, generator=generator) * (emb_gain / math.sqrt(d))
        drafter.fc.weight.copy_(torch.cat([w, torch.eye(d)], dim=1))
