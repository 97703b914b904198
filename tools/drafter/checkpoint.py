"""Reading a Hugging Face model folder's tensors (single file or shards) into float32 tensors."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file


class CheckpointError(ValueError):
    """A missing or misshaped tensor."""


def load_tensors(folder: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of `folder` (model.safetensors, or the shards its index names), as float32."""
    folder = Path(folder)
    single = folder / "model.safetensors"
    if single.exists():
        files = [single]
    else:
        index = json.loads((folder / "model.safetensors.index.json").read_text())
        files = [folder / f for f in sorted(set(index["weight_map"].values()))]
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        for name, t in load_file(str(f)).items():
            tensors[name] = t.float() if t.is_floating_point() else t
    return tensors


def take(tensors: dict[str, torch.Tensor], name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The tensor `name` with exactly `shape`, or a CheckpointError naming both."""
    if name not in tensors:
        raise CheckpointError(f"missing tensor {name}")
    t = tensors[name]
    if tuple(t.shape) != tuple(shape):
        raise CheckpointError(f"tensor {name} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    return t
