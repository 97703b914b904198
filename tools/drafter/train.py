"""Trains an EAGLE drafter for a Gated DeltaNet target (lib/spec/eagle_drafter.md).

    PYTHONPATH=tools python3 -m drafter.train --target models/gdn-pycode-22m \
        --tokens .device-data/pycode-tokens.bin --out OUT_DIR [--device auto] [--steps N] \
        [--batch B] [--seq-len L] [--lr LR] [--seed S] [--max-minutes M] [--log-every K]

Target features and distributions are computed on the fly by gdn_torch (no grad, fp32 with TF32
matmuls on a GPU). Loss = sum over unrolled levels j = 1..--depth of weight_j * (smooth-L1(predicted
feature, f_{t+1}) + w * CE(target's next-token distribution -> drafter's)). Training-time test:
level j >= 2 is the drafter's depth-j draft from every position, fed its own predicted features,
on the state after the true chain up to its branch point. This is exact, not an approximation
(EagleDrafter.unroll): the branch states are formed from the chain's chunk memory plus rank-1
updates, as inference forms them. Tokens along a branch are the data's (teacher forcing).

Validation (held-out tail of the token file): teacher-forced top-1 agreement of the drafter with
the target's argmax at depth 1..--depth, the "measured acceptance" of the README.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import sys
import time
from pathlib import Path

import torch

from .data import TokenFile
from .eagle import EagleDrafter, drafter_config_dict, init_fc_feature_passthrough, init_weights, layer_config_dict
from .gdn_torch import GDNModel
from .losses import level_losses, top1_agreement


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Train an EAGLE drafter for a GDN target.")
    ap.add_argument("--target", type=Path, required=True, help="target model folder")
    ap.add_argument("--tokens", type=Path, required=True, help="uint16 token file (prepare_corpus)")
    ap.add_argument("--out", type=Path, required=True, help="drafter folder to write")
    ap.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:N")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--depth", type=int, default=3, help="unrolled levels trained and measured")
    ap.add_argument("--level-decay", type=float, default=0.8, help="weight of level j = decay^(j-1)")
    ap.add_argument("--ce-weight", type=float, default=1.0, help="w: weight of the distillation CE")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="wall-clock budget for training + validation; stops cleanly and writes the folder")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--val-fraction", type=float, default=0.02)
    ap.add_argument("--val-windows", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"], help="dtype of the written weights")
    ap.add_argument("--fc-init", default="passthrough", choices=["passthrough", "random"],
                    help="fc starts as [random | identity] (the feature passes through) or random")
    ap.add_argument("--layer", default="{}", help="JSON overrides of the drafter layer config (default: target's layer)")
    return ap.parse_args(argv)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def lr_at(step: int, progress: float, args: argparse.Namespace) -> float:
    """Linear warm-up, then cosine decay to 10% of --lr as `progress` goes 0 -> 1."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    return args.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(progress, 1.0))))


def evaluate(drafter: EagleDrafter, target: GDNModel, windows: list[torch.Tensor], args, device) -> dict:
    hits = [0] * args.depth
    rows = [0] * args.depth
    ce = [0.0] * args.depth
    with torch.no_grad():
        for w in windows:
            w = w.to(device)
            t = target(w, chunk=args.chunk)
            levels = drafter.unroll(w[:, 1:], t.features[:, :-1], args.depth, args.chunk)
            for j, (h, n) in enumerate(top1_agreement(levels, t.logits)):
                hits[j] += h
                rows[j] += n
            for j, s in enumerate(level_losses(levels, t.features, t.logits)):
                ce[j] += float(s.ce) / len(windows)
    return {"top1_agreement": [h / max(n, 1) for h, n in zip(hits, rows)], "rows": rows, "ce": ce}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_readme(out: Path, args, info: dict) -> None:
    acc = info["val"]["top1_agreement"]
    acc0 = info["val_initial"]["top1_agreement"]
    fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)  # noqa: E731
    last = info["final_train_losses"]
    data = info.get("data_report") or {}
    text = f"""# EAGLE drafter for {args.target.name}

Trained by `tools/drafter/train.py` (format: `lib/spec/eagle_drafter.md`).

* Target: `{args.target.name}` (model.safetensors sha256 {info['target_sha256']}).
* Data: `{args.tokens.name}` ({info['tokens_train']} training tokens, the last {info['tokens_val']}
  held out for validation){', from ' + data['corpus'] + f" ({data['documents']} documents, {data['dropped_for_eval_prompts']} dropped for containing an eval prompt)" if data else ''}.
* Command: `{info['command']}`
* Seed {args.seed}; {info['steps_done']} steps of batch {args.batch} x {args.seq_len} tokens
  ({info['steps_done'] * args.batch * args.seq_len} tokens) in {info['train_seconds']:.0f} s on {info['device']}
  (torch {torch.__version__}){'; stopped by --max-minutes' if info['stopped_by_time'] else ''}.
* Loss: sum over levels j = 1..{args.depth} of {args.level_decay}^(j-1) * (smooth-L1(feature) +
  {args.ce_weight} * CE(target distribution -> drafter)); levels >= 2 are the drafter's exact depth-j
  drafts fed its own predicted features (training-time test, teacher-forced tokens).
* Final training losses (mean of the last {info['final_window']} steps), per level:
  feature {fmt(last['feature'])}; CE {fmt(last['ce'])}; total {last['total']:.4f}
  (first step: {info['first_train_losses']['total'] if info['first_train_losses'] else float('nan'):.4f}).
* Measured acceptance: teacher-forced top-1 agreement with the target's argmax on
  {info['val']['rows'][0]} held-out positions, depth 1..{args.depth}: **{fmt(acc)}**
  (before training: {fmt(acc0)}); validation CE per depth {fmt(info['val']['ce'])}.
  Depth d >= 2 drafts from the true prefix with the drafter's own features for the last d-1
  rows; each depth is measured on its own (not conditioned on the shallower ones being right).
"""
    (out / "README.md").write_text(text)


@torch.enable_grad()
def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    t0 = time.time()
    deadline = t0 + args.max_minutes * 60 if args.max_minutes else None
    torch.manual_seed(args.seed)
    device = pick_device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    target = GDNModel.from_folder(args.target, device)
    layer = layer_config_dict(target.cfg, **json.loads(args.layer))
    drafter = EagleDrafter(drafter_config_dict(layer, target.cfg), target)
    gen = torch.Generator().manual_seed(args.seed)
    # Residual writers start small (0.1) so that the fc's mix of embedding and feature carries
    # the stream at first.
    init_weights(drafter, gen, proj_gain=1.0, out_gain=0.1)
    if args.fc_init == "passthrough":
        init_fc_feature_passthrough(drafter, gen)
    drafter.to(device)
    data = TokenFile(args.tokens, args.val_fraction, args.seq_len)
    val = data.val_windows(args.batch, args.val_windows)
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, weight_decay=args.weight_decay, betas=(0.9, 0.95))

    t_eval = time.time()
    val_initial = evaluate(drafter, target, val, args, device)
    eval_seconds = time.time() - t_eval
    weights = [args.level_decay ** j for j in range(args.depth)]
    history: list[tuple[list[float], list[float]]] = []
    step, stopped_by_time, step_seconds = 0, False, 0.0
    t_train = time.time()
    train_budget = (deadline - t_train - eval_seconds - 15) if deadline else None
    while step < args.steps:
        now = time.time()
        if deadline is not None and now + step_seconds + eval_seconds + 15 > deadline:
            stopped_by_time = True
            break
        progress = step / args.steps
        if train_budget:
            progress = max(progress, (now - t_train) / max(train_budget, 1.0))
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, progress, args)
        x = data.sample(args.batch, gen).to(device)
        with torch.no_grad():
            t = target(x, chunk=args.chunk)
        levels = drafter.unroll(x[:, 1:], t.features[:, :-1], args.depth, args.chunk)
        stats = level_losses(levels, t.features, t.logits)
        loss = sum(wt * (s.feature + args.ce_weight * s.ce) for wt, s in zip(weights, stats))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        history.append(([float(s.feature.detach()) for s in stats], [float(s.ce.detach()) for s in stats],
                        float(loss.detach())))
        step += 1
        step_seconds = (time.time() - t_train) / step
        if step % args.log_every == 0 or step == 1:
            f, c, _ = history[-1]
            print(f"step {step} loss {history[-1][2]:.4f} feature {[round(v, 4) for v in f]} "
                  f"ce {[round(v, 4) for v in c]} lr {opt.param_groups[0]['lr']:.2e} "
                  f"{step_seconds:.3f} s/step", flush=True)
    train_seconds = time.time() - t_train
    val_final = evaluate(drafter, target, val, args, device)
    window = max(1, min(args.log_every, len(history)))
    tail = history[-window:] if history else [([math.nan] * args.depth, [math.nan] * args.depth, math.nan)]
    mean = lambda k: [sum(h[k][j] for h in tail) / len(tail) for j in range(args.depth)]  # noqa: E731
    report_path = args.tokens.with_suffix(".json")
    info = {
        "command": "python3 -m drafter.train " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "target_sha256": sha256(args.target / "model.safetensors"),
        "tokens_train": len(data.train), "tokens_val": len(data.val),
        "data_report": json.loads(report_path.read_text()) if report_path.exists() else None,
        "steps_done": step, "stopped_by_time": stopped_by_time, "train_seconds": train_seconds,
        "seconds_per_step": step_seconds, "device": str(device) if device.type != "cuda" else torch.cuda.get_device_name(device),
        "final_window": len(tail),
        "final_train_losses": {"feature": mean(0), "ce": mean(1), "total": sum(h[2] for h in tail) / len(tail)},
        "first_train_losses": {"feature": history[0][0], "ce": history[0][1], "total": history[0][2]} if history else None,
        "val_initial": val_initial, "val": val_final, "seed": args.seed,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    drafter.save(args.out, dtype=torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    (args.out / "train_log.json").write_text(json.dumps(info, indent=2) + "\n")
    write_readme(args.out, args, info)
    print(f"wrote {args.out}: {step} steps, top-1 agreement per depth "
          f"{[round(a, 4) for a in val_final['top1_agreement']]} in {time.time() - t0:.0f} s", flush=True)
    return info


if __name__ == "__main__":
    main()
