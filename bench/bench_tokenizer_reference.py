#!/usr/bin/env python3
"""The text of bench_tokenizer through Hugging Face `tokenizers`, single thread, for comparison.

    python3 bench/bench_tokenizer_reference.py [--tokenizer DIR] [--file PATH] [--mb N] [--repeats N]

Same text, modes and statistics (wall and process CPU time) as bench/bench_tokenizer.cpp: "whole" encodes the entire text in
one call, "documents" one document at a time (a Python loop over Tokenizer.encode, no batching).
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def documents(path):
    if path is None:
        with open(os.path.join(ROOT, "models", "gdn-pycode-22m", "eval_prompts.json"), encoding="utf-8") as f:
            return [p + "\n" for p in json.load(f)["prompts"]]
    data = open(path, "rb").read()
    docs, at = [], 0
    while at < len(data):  # 4 KiB stretches, cut at a character boundary
        end = min(len(data), at + 4096)
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end += 1
        docs.append(data[at:end].decode("utf-8"))
        at = end
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "gdn-pycode-22m"))
    ap.add_argument("--file")
    ap.add_argument("--mb", type=float, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    docs = documents(args.file)
    all_docs, size, target = [], 0, int(args.mb * 1e6)
    while size < target:
        for d in docs:
            all_docs.append(d)
            size += len(d.encode("utf-8"))
            if size >= target:
                break
    whole = "".join(all_docs)
    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))

    wall_whole, wall_docs, cpu_whole, cpu_docs = [], [], [], []
    n_whole = n_docs = 0
    for r in range(args.repeats + 1):  # run 0 warms up
        t0, c0 = time.perf_counter(), time.process_time()
        n_whole = len(tok.encode(whole, add_special_tokens=False).ids)
        t1, c1 = time.perf_counter(), time.process_time()
        n_docs = sum(len(tok.encode(d, add_special_tokens=False).ids) for d in all_docs)
        t2, c2 = time.perf_counter(), time.process_time()
        if r > 0:
            wall_whole.append(t1 - t0)
            wall_docs.append(t2 - t1)
            cpu_whole.append(c1 - c0)
            cpu_docs.append(c2 - c1)
    mb = size / 1e6
    med = statistics.median
    print(f"tokenizer: {args.tokenizer} (tokenizers {__import__('tokenizers').__version__})")
    print(f"text: {mb:.2f} MB, {len(all_docs)} documents, {n_whole} tokens ({size / n_whole:.2f} bytes/token)")
    print(f"whole:     {mb / med(wall_whole):8.2f} MB/s wall  {mb / med(cpu_whole):8.2f} MB/s cpu  (median of {args.repeats})")
    print(f"documents: {mb / med(wall_docs):8.2f} MB/s wall  {mb / med(cpu_docs):8.2f} MB/s cpu  (median of {args.repeats}, {n_docs} tokens)")


if __name__ == "__main__":
    sys.exit(main())
