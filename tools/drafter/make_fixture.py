"""Writes tests/fixtures/eagle_tiny_a: a small random EAGLE drafter for the target
tests/fixtures/gdn_tiny_a and the outputs the C++ drafter must reproduce (lib/spec/eagle_drafter.md,
section "Test fixture"). Deterministic: fixed seed, float32, token loop form throughout.

    PYTHONPATH=tools python3 -m drafter.make_fixture [--target DIR] [--out DIR] [--seed N]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
from safetensors.torch import save_file

from .eagle import EagleDrafter, drafter_config_dict, init_weights, layer_config_dict
from .gdn_torch import GDNModel

REPO = Path(__file__).resolve().parents[2]
SEQ_LEN = 24  # S
# The draft tree after the chain: parents in topological order (-1 = first level). Three first-
# level nodes, branching at depths 1 and 2, depth 4 along 0 -> 3 -> 6 -> 9.
TREE_PARENTS = [-1, -1, -1, 0, 0, 1, 3, 3, 4, 6]
# The drafter layer deliberately differs from the target's (4 heads x 16 instead of 2 x 32, an
# explicit MLP width), so that a loader that reads the target's layer shape shows.
LAYER = dict(num_heads=4, head_dim=16, expand_v=2, conv_size=4, use_gate=True, use_short_conv=True,
             allow_neg_eigval=False, intermediate_size=128)
# Weight scales: projections into the mixer and the MLP keep unit gain (their inputs are
# normalised); o_proj and down_proj write into the residual stream at about the scale of the
# target's features (rms ~0.04 on gdn_tiny_a), so the predicted features fed back at depth >= 2
# look like real ones; norm weights 1 + 0.2 N(0,1) so that a skipped norm shows.
OUT_GAIN = 0.04
NORM_JITTER = 0.2


def build_tree(drafter: EagleDrafter, root_logits: torch.Tensor, root_feature: torch.Tensor, state,
               parents: list[int]) -> tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens as greedy drafting would pick them: the children of a node are its parent's top-k
    tokens (k = its number of children), in order. Nodes are evaluated by path replay."""
    n = len(parents)
    tokens: list[int] = []
    for v in range(n):
        p = parents[v]
        siblings_before = sum(1 for u in range(v) if parents[u] == p)
        if p < 0:
            src = root_logits
        else:
            _, _, lg = drafter.evaluate_tree(tokens[: p + 1], parents[: p + 1], root_feature, state)
            src = lg[p]
        tokens.append(int(torch.topk(src, siblings_before + 1).indices[-1]))
    f_in, f_out, logits = drafter.evaluate_tree(tokens, parents, root_feature, state)
    return tokens, f_in, f_out, logits


@torch.no_grad()
def make(target_dir: Path, out_dir: Path, seed: int = 20260418) -> dict[str, torch.Tensor]:
    target = GDNModel.from_folder(target_dir)
    config = drafter_config_dict(layer_config_dict(target.cfg, **LAYER), target.cfg)
    drafter = EagleDrafter(config, target)
    gen = torch.Generator().manual_seed(seed)
    init_weights(drafter, gen, proj_gain=1.0, out_gain=OUT_GAIN, norm_jitter=NORM_JITTER)
    tokens = torch.randint(0, target.cfg.vocab_size, (1, SEQ_LEN), generator=gen)
    features = target(tokens, mode="recurrent").features[0]  # [S, D]

    # The chain from a zero state, row by row: row i has token x_{i+1} and feature f_i.
    state = drafter.zero_state(1)
    outs, logits = [], []
    for i in range(SEQ_LEN - 1):
        o, state = drafter.step(tokens[:, i + 1], features[i][None], state)
        outs.append(o.features[0])
        logits.append(o.logits[0])
    chain_out, chain_logits = torch.stack(outs), torch.stack(logits)

    t_tok, t_in, t_out, t_logits = build_tree(drafter, chain_logits[-1], chain_out[-1], state, TREE_PARENTS)
    i32 = lambda x: torch.as_tensor(x, dtype=torch.int32)  # noqa: E731
    expected = {
        "target.tokens": i32(tokens[0]),
        "target.features": features,
        "chain.tokens": i32(tokens[0, 1:]),
        "chain.features_in": features[:-1],
        "chain.features_out": chain_out,
        "chain.logits": chain_logits,
        "tree.tokens": i32(t_tok),
        "tree.parents": i32(TREE_PARENTS),
        "tree.features_in": t_in,
        "tree.features_out": t_out,
        "tree.logits": t_logits,
    }
    expected = {k: v.clone().contiguous() for k, v in expected.items()}  # no shared storage
    drafter.save(out_dir, dtype=torch.float32)
    save_file(expected, str(out_dir / "expected.safetensors"), metadata={"seed": str(seed)})
    return expected


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=Path, default=REPO / "tests" / "fixtures" / "gdn_tiny_a")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "eagle_tiny_a")
    ap.add_argument("--seed", type=int, default=20260418)
    a = ap.parse_args()
    exp = make(a.target, a.out, a.seed)
    for k, v in exp.items():
        print(f"{k:22s} {str(list(v.shape)):12s} max|x| {float(v.float().abs().max()):.4g}")
    print("tree tokens", exp["tree.tokens"].tolist())


if __name__ == "__main__":
    main()
