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

import importlib
from typing import Any

# Where each public name lives; imported on first use (PEP 562), so that the command line's
# --help and a clear message about a missing extra come before Starlette or uvicorn is needed.
_EXPORTS = {"create_app": "app", "ChatTemplate": "chat_template", "Engine": "engine",
            "Limits": "protocol"}
__all__ = list(_EXPORTS)


def require_extra() -> None:
    """Raise ImportError with the install command when the server extra is missing."""
    for name in ("starlette", "uvicorn", "jinja2"):
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ImportError(f"specla.server needs the server extra ({name} is missing): "
                              f"pip install 'specla[server]'") from e


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'specla.server' has no attribute {name!r}")
    require_extra()
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
