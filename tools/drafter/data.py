"""Token files written by prepare_corpus: uint16 ids, split into a training part and a held-out
validation slice at the end."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


class TokenFile:
    def __init__(self, path: str | Path, val_fraction: float, seq_len: int) -> None:
        self.path = Path(path)
        ids = np.fromfile(self.path, dtype="<u2")
        n_val = max(int(len(ids) * val_fraction), seq_len + 1)
        if len(ids) < n_val + 2 * seq_len:
            raise ValueError(f"{self.path}: {len(ids)} tokens are too few for seq-len {seq_len}")
        self.train = torch.from_numpy(ids[: len(ids) - n_val].astype(np.int64))
        self.val = torch.from_numpy(ids[len(ids) - n_val:].astype(np.int64))
        self.seq_len = seq_len

    def sample(self, batch: int, gen: torch.Generator) -> torch.Tensor:
        """Random training windows [batch, seq_len]."""
        starts = torch.randint(0, len(self.train) - self.seq_len, (batch,), generator=gen)
        return torch.stack([self.train[s: s + self.seq_len] for s in starts.tolist()])

    def val_windows(self, batch: int, max_windows: int) -> list[torch.Tensor]:
        """Consecutive non-overlapping validation windows, in batches."""
        n = min(len(self.val) // self.seq_len, max_windows)
        w = self.val[: n * self.seq_len].view(n, self.seq_len)
        return [w[i: i + batch] for i in range(0, n, batch)]
