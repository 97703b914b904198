"""Training loss and the teacher-forced acceptance measure of the drafter's unrolled levels.

Alignment (eagle_drafter.md): window x_0..x_{L-1}, target features f_t and logits l_t (the
distribution of x_{t+1}). Drafter row r (0..L-2) has token x_{r+1} and input f_r (level 1) or
the drafter's own prediction (levels >= 2); every level's row r predicts f_{r+1} and, through the
shared head, the distribution of x_{r+2}, whose target is softmax(l_{r+1}). Level j's row r
exists when r >= j-1 (its branch point, chain row r-j+1, is inside the window)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .eagle import DraftOutput


@dataclass
class LevelStats:
    feature: torch.Tensor  # smooth-L1 per level
    ce: torch.Tensor  # cross-entropy(target distribution -> drafter distribution) per level


def level_losses(levels: list[DraftOutput], features: torch.Tensor, target_logits: torch.Tensor) -> list[LevelStats]:
    f_next = features[:, 1:]
    p_next = torch.softmax(target_logits[:, 1:].float(), dim=-1)
    stats = []
    for j, lv in enumerate(levels, start=1):
        lo = j - 1
        fl = F.smooth_l1_loss(lv.features[:, lo:], f_next[:, lo:])
        logq = torch.log_softmax(lv.logits[:, lo:].float(), dim=-1)
        ce = -(p_next[:, lo:] * logq).sum(-1).mean()
        stats.append(LevelStats(fl, ce))
    return stats


def top1_agreement(levels: list[DraftOutput], target_logits: torch.Tensor) -> list[tuple[int, int]]:
    """Per level: (rows where the drafter's argmax equals the target's, rows)."""
    want = target_logits[:, 1:].argmax(-1)
    out = []
    for j, lv in enumerate(levels, start=1):
        lo = j - 1
        hit = (lv.logits[:, lo:].argmax(-1) == want[:, lo:])
        out.append((int(hit.sum()), hit.numel()))
    return out
