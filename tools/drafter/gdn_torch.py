"""The target: a fla `gated_deltanet` causal LM in pure PyTorch (lib/backend/cpu/gdn_math.md),
loaded from a model folder (config.json + model.safetensors, F32/BF16/F16, tied embeddings
supported).

`forward` returns per-position features (the last block's output before the final norm: what the
drafter reads) and logits. The chunk form is the default (fast on a GPU); the recurrent form is the
token loop of gdn_math.md, the reference the tests hold the chunk form to."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .checkpoint import load_tensors, take
from .config import GDNConfig
from .gdn_layer import GDNBlock, LayerState, rmsnorm


@dataclass
class TargetOutput:
    features: torch.Tensor  # [B, T, D] last hidden state before the final norm
    logits: torch.Tensor  # [B, T, vocab]
    hidden: list[torch.Tensor]  # input of each block [B, T, D] (fla's hidden_states[:-1])
    state: list[LayerState]


class GDNModel(nn.Module):
    def __init__(self, cfg: GDNConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(GDNBlock(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(cfg.hidden_size))
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    @staticmethod
    def from_folder(folder: str | Path, device: torch.device | str = "cpu") -> "GDNModel":
        cfg = GDNConfig.from_folder(folder)
        model = GDNModel(cfg)
        tensors = load_tensors(folder)
        own = model.state_dict()
        loaded: dict[str, torch.Tensor] = {}
        for name, t in own.items():
            src = _checkpoint_name(name)
            if src == "lm_head.weight" and cfg.tie_word_embeddings:
                src = "model.embeddings.weight"
            loaded[name] = take(tensors, src, tuple(t.shape))
        model.load_state_dict(loaded)
        model.requires_grad_(False)
        return model.to(device).eval()

    def zero_state(self, batch: int) -> list[LayerState]:
        dev = self.embeddings.weight.device
        return [layer.zero_state(batch, dev) for layer in self.layers]

    def head(self, features: torch.Tensor) -> torch.Tensor:
        """Features -> logits through the final norm and lm_head (shared with the drafter)."""
        return self.lm_head(rmsnorm(features, self.norm.weight, self.cfg.norm_eps))

    def forward(
        self,
        tokens: torch.Tensor,
        state: list[LayerState] | None = None,
        mode: str = "chunk",
        chunk: int = 64,
        with_logits: bool = True,
    ) -> TargetOutput:
        """tokens [B, T] (int) after `state` (zero state when None)."""
        if state is None:
            state = self.zero_state(tokens.shape[0])
        h = self.embeddings(tokens)
        hidden, new_state = [], []
        for layer, st in zip(self.layers, state):
            hidden.append(h)
            h, st, _ = layer.forward_seq(h, st, mode, chunk)
            new_state.append(st)
        logits = self.head(h) if with_logits else h.new_zeros(0)
        return TargetOutput(features=h, logits=logits, hidden=hidden, state=new_state)


def _checkpoint_name(module_name: str) -> str:
    """This module's state_dict key -> the fla checkpoint's tensor name."""
    if module_name.startswith("lm_head."):
        return module_name
    return "model." + module_name
