# SPDX-License-Identifier: Apache-2.0
"""The checkpoint's chat template (``chat_template`` of tokenizer_config.json), rendered with
jinja2 the way Hugging Face's ``apply_chat_template`` does: a sandboxed environment, blocks
trimmed, ``messages``, ``add_generation_prompt``, ``bos_token`` and ``eos_token`` in scope,
``raise_exception()`` for templates that refuse a conversation."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional


class ChatTemplateError(Exception):
    """The template could not render these messages (the template's own message)."""


def _token_text(value: Any) -> str:
    if isinstance(value, dict):  # {"content": "<s>", ...} in newer configs
        value = value.get("content")
    return value if isinstance(value, str) else ""


class ChatTemplate:
    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise ChatTemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        env.filters["tojson"] = lambda v, indent=None: json.dumps(v, indent=indent,
                                                                 ensure_ascii=False)
        try:
            self._template = env.from_string(source)
        except TemplateError as e:
            raise ChatTemplateError(f"the chat template does not compile: {e}") from e
        self.bos_token = bos_token
        self.eos_token = eos_token

    @classmethod
    def from_checkpoint(cls, folder: str) -> Optional["ChatTemplate"]:
        """The checkpoint's template, or None when it has none."""
        path = os.path.join(folder, "tokenizer_config.json")
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: the default one
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        if not isinstance(source, str) or not source:
            return None
        return cls(source, _token_text(config.get("bos_token")),
                   _token_text(config.get("eos_token")))

    def render(self, messages: List[Dict[str, Any]]) -> str:
        from jinja2.exceptions import TemplateError
        try:
            return self._template.render(messages=messages, add_generation_prompt=True,
                                         bos_token=self.bos_token, eos_token=self.eos_token)
        except TemplateError as e:
            raise ChatTemplateError(f"the chat template failed: {e}") from e
