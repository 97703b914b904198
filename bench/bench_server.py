#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Load benchmark of specla-server: C concurrent clients send a fixed number of streaming
completions (greedy, the demo model's held-out eval prompts in turn) and the figures come out
per concurrency level: requests/s, time to first token p50/p95, tokens/s per request (over the
whole request, and after the first token) and in all.

    python3 bench/bench_server.py --model models/gdn-pycode-22m --concurrency 1,2,4 \\
        [--requests 16] [--max-tokens 64] [--slots 4] [--no-speculative] [--stop-at-eos] [--json]
    python3 bench/bench_server.py --url http://127.0.0.1:8000 --concurrency 4

With --model it starts `python -m specla.server` on a free port of 127.0.0.1 (the package from
bindings/python/src unless specla is installed; SPECLA_LIBRARY picks the library) and stops it
at the end; with --url it uses a running server. Needs httpx (and the server extra for --model).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional

import httpx

REPO = Path(__file__).resolve().parents[1]


def percentile(values: List[float], q: float) -> float:
    """The q-quantile by linear interpolation between closest ranks."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def one_request(client: httpx.Client, prompt: str, max_tokens: int,
                ignore_eos: bool = True) -> Dict[str, float]:
    """One streaming completion: seconds to the first text, in all, and the tokens made."""
    t0 = time.perf_counter()
    first: Optional[float] = None
    usage = None
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": ignore_eos}
    with client.stream("POST", "/v1/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read().decode()}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                raise RuntimeError(event["error"]["message"])
            if first is None and event["choices"] and event["choices"][0]["text"]:
                first = time.perf_counter() - t0
            usage = event.get("usage") or usage
    total = time.perf_counter() - t0
    tokens = usage["completion_tokens"] if usage else 0
    return {"ttft_s": first if first is not None else total, "total_s": total,
            "tokens": tokens}


def run_level(url: str, prompts: List[str], concurrency: int, requests: int,
              max_tokens: int, ignore_eos: bool) -> Dict[str, float]:
    clients = [httpx.Client(base_url=url, timeout=600) for _ in range(concurrency)]
    try:
        def work(i: int) -> Dict[str, float]:
            return one_request(clients[i % concurrency], prompts[i % len(prompts)], max_tokens,
                               ignore_eos)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(work, range(requests)))
        wall = time.perf_counter() - t0
    finally:
        for c in clients:
            c.close()
    ttft = [r["ttft_s"] for r in results]
    per_request = [r["tokens"] / r["total_s"] for r in results if r["total_s"] > 0]
    # After the first token: the decoding rate a streaming client sees, without the prompt.
    decode = [(r["tokens"] - 1) / (r["total_s"] - r["ttft_s"]) for r in results
              if r["tokens"] > 1 and r["total_s"] > r["ttft_s"]]
    tokens = sum(r["tokens"] for r in results)
    return {"concurrency": concurrency, "requests": requests, "wall_s": wall,
            "requests_per_s": requests / wall, "ttft_p50_ms": 1e3 * percentile(ttft, 0.5),
            "ttft_p95_ms": 1e3 * percentile(ttft, 0.95),
            "tokens_per_s_per_request_mean": statistics.mean(per_request),
            "decode_tokens_per_s_per_request_mean": statistics.mean(decode) if decode
            else float("nan"),
            "tokens_per_s_total": tokens / wall, "completion_tokens": tokens}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args: argparse.Namespace) -> "tuple[subprocess.Popen, str]":
    port = free_port()
    env = dict(os.environ)
    try:
        import specla  # noqa: F401 - installed: use it
    except ImportError:
        src = str(REPO / "bindings" / "python" / "src")
        env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, "-m", "specla.server", "--model", args.model, "--port", str(port),
           "--slots", str(args.slots), "--queue", str(max(args.concurrency_levels) + 1),
           "--max-prompt-tokens", "32768", "--log-level", "warning"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if not args.speculative:
        cmd.append("--no-speculative")
    proc = subprocess.Popen(cmd, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with status {proc.returncode}")
        try:
            if httpx.get(url + "/health").status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the server did not start within 60 s")
        time.sleep(0.1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running server")
    where.add_argument("--model", help="start a server on this checkpoint")
    p.add_argument("--concurrency", default="1,2,4", help="comma-separated client counts")
    p.add_argument("--requests", type=int, default=16, help="requests per concurrency level")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--prompts", default=str(REPO / "models" / "gdn-pycode-22m" /
                                          "eval_prompts.json"),
                   help="a JSON file with a list of prompts under 'prompts'")
    p.add_argument("--slots", type=int, default=4, help="with --model: the server's slots")
    p.add_argument("--threads", type=int, default=0, help="with --model: threads per request")
    p.add_argument("--no-speculative", dest="speculative", action="store_false",
                   help="with --model: plain decoding")
    p.add_argument("--stop-at-eos", action="store_true",
                   help="let requests end at EOS (by default each makes exactly --max-tokens "
                   "tokens, so that every level does the same work)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    args.concurrency_levels = [int(c) for c in args.concurrency.split(",")]
    if min(args.concurrency_levels) < 1 or args.requests < 1 or args.max_tokens < 1:
        p.error("--concurrency, --requests and --max-tokens must be positive")
    with open(args.prompts, encoding="utf-8") as f:
        prompts = json.load(f)["prompts"]

    proc = None
    url = args.url
    if args.model:
        proc, url = start_server(args)
    try:
        one_request(httpx.Client(base_url=url, timeout=600), prompts[0], 4)  # warm-up
        levels = [run_level(url, prompts, c, args.requests, args.max_tokens,
                            not args.stop_at_eos) for c in args.concurrency_levels]
        health = httpx.get(url + "/health").json()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    if args.json:
        print(json.dumps({"server": health, "max_tokens": args.max_tokens,
                          "stop_at_eos": args.stop_at_eos, "levels": levels}, indent=2))
        return 0
    print(f"server: {health.get('model')} slots={health.get('slots')} "
          f"speculative={health.get('speculative')}  max_tokens={args.max_tokens}")
    print(f"{'clients':>7} {'requests':>8} {'req/s':>7} {'TTFT p50':>10} {'TTFT p95':>10} "
          f"{'tok/s/req':>10} {'decode/req':>10} {'tok/s all':>10}")
    for lv in levels:
        print(f"{lv['concurrency']:>7} {lv['requests']:>8} {lv['requests_per_s']:>7.2f} "
              f"{lv['ttft_p50_ms']:>8.1f}ms {lv['ttft_p95_ms']:>8.1f}ms "
              f"{lv['tokens_per_s_per_request_mean']:>10.1f} "
              f"{lv['decode_tokens_per_s_per_request_mean']:>10.1f} "
              f"{lv['tokens_per_s_total']:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
