# SPDX-License-Identifier: Apache-2.0
"""An OpenAI-compatible HTTP server over SpecLA: ``specla-server --model DIR`` (or
``python -m specla.server``).

Endpoints: ``POST /v1/completions``, ``POST /v1/chat/completions`` (with the checkpoint's chat
template), ``GET /v1/models``, ``GET /health``; ``stream: true`` answers Server-Sent Events.
Each request runs on a session of its own, at most ``--slots`` at once, with ``--queue`` more
waiting; speculative decoding with the prompt-lookup drafter is on unless
``--no-speculative``. Needs the ``server`` extra (``pip install specla[server]``).
"""
from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(f"specla.server needs the server extra ({e.name} is missing): "
                      f"pip install 'specla[server]'") from e

from .app import create_app
from .chat_template import ChatTemplate
from .engine import Engine
from .protocol import Limits

__all__ = ["create_app", "ChatTemplate", "Engine", "Limits"]
