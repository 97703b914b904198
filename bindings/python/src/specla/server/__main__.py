# SPDX-License-Identifier: Apache-2.0
"""``specla-server`` / ``python -m specla.server``: load a checkpoint and serve it.

SIGINT or SIGTERM stops the server gracefully: it stops accepting connections, aborts the
running generations (their clients get an error event or a 503), waits for their threads, and
frees the sessions and the model before exiting with status 0.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import List, Optional


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="specla-server",
                                description="An OpenAI-compatible HTTP server over SpecLA.")
    p.add_argument("--model", required=True, help="checkpoint folder (config.json, "
                   "model.safetensors, tokenizer.json; tokenizer_config.json for chat)")
    p.add_argument("--model-name", help="the model id clients name (default: the folder's name)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--threads", type=int, default=0,
                   help="CPU threads per request (default: the CPUs divided among the slots)")
    p.add_argument("--slots", type=int, default=4, help="requests generating at once")
    p.add_argument("--queue", type=int, default=16,
                   help="requests waiting for a slot; more are answered 429")
    p.add_argument("--max-prompt-tokens", type=int, default=4096,
                   help="longest prompt accepted, in tokens")
    p.add_argument("--max-tokens", type=int, default=2048,
                   help="largest max_tokens accepted (and the chat default)")
    p.add_argument("--no-speculative", dest="speculative", action="store_false",
                   help="plain decoding (speculative decoding with the prompt-lookup drafter "
                   "is on by default; its output is the same)")
    p.add_argument("--log-level", default="info",
                   choices=("critical", "error", "warning", "info", "debug"))
    args = p.parse_args(argv)
    for name in ("slots", "max_prompt_tokens", "max_tokens"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.queue < 0:
        p.error("--queue must be 0 or more")
    if args.threads < 0:
        p.error("--threads must be 0 or more")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    from . import require_extra
    try:
        require_extra()
    except ImportError as e:
        print(f"specla-server: {e}", file=sys.stderr)
        return 2
    import uvicorn

    import specla

    from . import ChatTemplate, Engine, Limits, create_app

    threads = args.threads or max(1, (os.cpu_count() or 1) // args.slots)
    try:
        template = ChatTemplate.from_checkpoint(args.model)
        engine = Engine.load(args.model, backend=args.backend, threads=threads,
                             slots=args.slots, queue=args.queue, speculative=args.speculative,
                             model_name=args.model_name)
    except (specla.SpeclaError, ValueError, OSError) as e:
        print(f"specla-server: cannot load {args.model}: {e}", file=sys.stderr)
        return 1
    app = create_app(engine, Limits(args.max_prompt_tokens, args.max_tokens),
                     chat_template=template)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # type: ignore[no-untyped-def]
            engine.abort_all()  # running streams end now, so the connections close
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=10)
    # uvicorn re-raises the signal it stopped on once it has shut down; these handlers make that
    # a clean exit (the engine is closed by then).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        Server(config).run()
    finally:
        engine.close()  # idempotent: also when uvicorn failed to start (a port in use)
    return 0


if __name__ == "__main__":
    sys.exit(main())
