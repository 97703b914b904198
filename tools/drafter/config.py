"""The fla `gated_deltanet` config.json fields that change the math (lib/backend/cpu/gdn_math.md,
section 1)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config.json that does not describe a pure Gated DeltaNet model this tool supports."""


@dataclass(frozen=True)
class GDNConfig:
    hidden_size: int
    num_hidden_layers: int
    num_heads: int
    num_v_heads: int
    head_dim: int
    head_v_dim: int
    conv_size: int
    use_short_conv: bool
    use_gate: bool
    allow_neg_eigval: bool
    intermediate_size: int
    norm_eps: float
    vocab_size: int
    tie_word_embeddings: bool
    raw: dict[str, Any]

    @property
    def key_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def value_dim(self) -> int:
        return self.num_v_heads * self.head_v_dim

    @staticmethod
    def from_dict(cfg: dict[str, Any], where: str = "config.json") -> "GDNConfig":
        if cfg.get("model_type", "gated_deltanet") != "gated_deltanet":
            raise ConfigError(f"{where}: model_type {cfg.get('model_type')!r} is not gated_deltanet")
        for field in ("attn", "attnres_block_size"):
            if cfg.get(field) is not None:
                raise ConfigError(f"{where}: {field} must be null for a pure GDN model")
        if cfg.get("use_l2warp"):
            raise ConfigError(f"{where}: use_l2warp is not supported")
        d = int(cfg["hidden_size"])
        h = int(cfg["num_heads"])
        hv = cfg.get("num_v_heads")
        hv = h if hv is None else int(hv)
        if hv % h:
            raise ConfigError(f"{where}: num_v_heads {hv} is not a multiple of num_heads {h}")
        k = int(cfg["head_dim"])
        v = float(k) * float(cfg.get("expand_v", 2))
        if v != int(v):
            raise ConfigError(f"{where}: head_dim * expand_v = {v} is not an integer")
        inter = cfg.get("intermediate_size")
        if inter is None:
            ratio = cfg.get("hidden_ratio", 4)
            inter = 256 * math.ceil(int(d * ratio * 2 / 3) / 256)
        return GDNConfig(
            hidden_size=d,
            num_hidden_layers=int(cfg["num_hidden_layers"]),
            num_heads=h,
            num_v_heads=hv,
            head_dim=k,
            head_v_dim=int(v),
            conv_size=int(cfg.get("conv_size", 4)),
            use_short_conv=bool(cfg.get("use_short_conv", True)),
            use_gate=bool(cfg.get("use_gate", True)),
            allow_neg_eigval=bool(cfg.get("allow_neg_eigval", False)),
            intermediate_size=int(inter),
            norm_eps=float(cfg.get("norm_eps", 1e-6)),
            vocab_size=int(cfg["vocab_size"]),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            raw=dict(cfg),
        )

    @staticmethod
    def from_folder(folder: str | Path) -> "GDNConfig":
        path = Path(folder) / "config.json"
        return GDNConfig.from_dict(json.loads(path.read_text()), str(path))
