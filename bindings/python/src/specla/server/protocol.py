# SPDX-License-Identifier: Apache-2.0
"""The OpenAI request bodies the server accepts, checked field by field, and its error bodies.

Every refusal is an :class:`APIError` carrying the HTTP status and the OpenAI error object
(``{"error": {"message", "type", "param", "code"}}``), so a client sees which field was wrong
and why, never a stack trace.
"""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# The sampling seed is the library's uint64, whose largest value means "random".
_SEED_LIMIT = 2**64 - 1
MAX_STOP_STRINGS = 16
# OpenAI's bounds of the penalties and of logit_bias (its entry count and bias range).
PENALTY_LIMIT = 2.0
MAX_LOGIT_BIAS = 300
LOGIT_BIAS_LIMIT = 100.0


class APIError(Exception):
    """A request the server refuses, with the OpenAI error body it answers."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: Optional[str] = None, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> Dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def invalid(param: str, message: str, code: str = "invalid_value") -> APIError:
    return APIError(400, f"{param}: {message}", param=param, code=code)


@dataclass
class Limits:
    """What the server allows one request."""
    max_prompt_tokens: int
    max_tokens: int


@dataclass
class SamplingRequest:
    """The fields the two generation endpoints share, checked."""
    model: Optional[str]
    max_tokens: Optional[int]  # None: the endpoint's default
    temperature: float
    top_p: float
    seed: int
    stop: List[str]
    stream: bool
    include_usage: bool
    stop_at_eos: bool
    logprobs: Optional[int] = None  # None: off; else the alternatives reported per token
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    # token id -> bias; the ids are checked against the vocabulary by the application, which
    # knows the model (check_logit_bias_ids)
    logit_bias: Dict[int, float] = field(default_factory=dict)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _int(body: Dict[str, Any], name: str, lo: int, hi: int) -> Optional[int]:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(name, f"must be an integer, not {_type_name(value)}", "invalid_type")
    if not lo <= value <= hi:
        raise invalid(name, f"must be in [{lo}, {hi}], not {value}")
    return value


def _number(body: Dict[str, Any], name: str, default: float, lo: float, hi: float,
            lo_open: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(name, f"must be a number, not {_type_name(value)}", "invalid_type")
    value = float(value)
    below = value <= lo if lo_open else value < lo
    if not math.isfinite(value) or below or value > hi:
        interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
        raise invalid(name, f"must be in {interval}, not {value:g}")
    return value


def _bool(body: Dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(name, f"must be a boolean, not {_type_name(value)}", "invalid_type")
    return value


def _stop(body: Dict[str, Any]) -> List[str]:
    value = body.get("stop")
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise invalid("stop", "must be a string or a list of strings", "invalid_type")
    if len(stops) > MAX_STOP_STRINGS:
        raise invalid("stop", f"at most {MAX_STOP_STRINGS} stop strings, not {len(stops)}")
    for s in stops:
        if not s:
            raise invalid("stop", "stop strings must not be empty")
        if "\0" in s:
            raise invalid("stop", "stop strings must not contain a NUL character")
    return stops


def _logit_bias(body: Dict[str, Any]) -> Dict[int, float]:
    """OpenAI's logit_bias: an object of token ids, written as integer strings (JSON keys are
    strings), to biases in [-100, 100]."""
    value = body.get("logit_bias")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("logit_bias", "must be an object mapping token ids to biases, not "
                      f"{_type_name(value)}", "invalid_type")
    if len(value) > MAX_LOGIT_BIAS:
        raise invalid("logit_bias", f"at most {MAX_LOGIT_BIAS} entries, not {len(value)}")
    out: Dict[int, float] = {}
    for key, bias in value.items():
        # str.isdigit() also takes other scripts' digits ("\u0663"), which int() reads.
        if not (key.isascii() and key.isdigit()):
            raise invalid("logit_bias", f"keys must be token ids written as integers, not "
                          f"{key!r}", "invalid_type")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)):
            raise invalid("logit_bias", f"the bias of token {key} must be a number, not "
                          f"{_type_name(bias)}", "invalid_type")
        if not (math.isfinite(bias) and -LOGIT_BIAS_LIMIT <= bias <= LOGIT_BIAS_LIMIT):
            raise invalid("logit_bias", f"the bias of token {key} must be in "
                          f"[{-LOGIT_BIAS_LIMIT:g}, {LOGIT_BIAS_LIMIT:g}], not {bias:g}")
        token = int(key)
        if token in out:  # "7" and "07": which bias was meant is not clear
            raise invalid("logit_bias", f"token {token} is listed twice")
        out[token] = float(bias)
    return out


def check_logit_bias_ids(logit_bias: Dict[int, float], vocab_size: int) -> None:
    """Refuse logit_bias ids outside the model's vocabulary [0, vocab_size)."""
    bad = [t for t in logit_bias if t >= vocab_size]
    if bad:
        raise invalid("logit_bias", f"token id {bad[0]} is outside the vocabulary "
                      f"[0, {vocab_size})")


def check_body(body: Any) -> Dict[str, Any]:
    if not isinstance(body, dict):
        raise APIError(400, f"the request body must be a JSON object, not {_type_name(body)}",
                       code="invalid_type")
    return body


# OpenAI's bounds: completions take `logprobs` as a count of alternatives (0..5), chat takes
# `logprobs` as a flag and `top_logprobs` (0..20) as the count.
COMPLETIONS_MAX_LOGPROBS = 5
CHAT_MAX_TOP_LOGPROBS = 20


def _logprobs(body: Dict[str, Any], chat: bool) -> Optional[int]:
    if not chat:
        if body.get("top_logprobs") is not None:
            raise invalid("top_logprobs", "is a chat completions field: completions take "
                          "logprobs as the number of alternatives", "unsupported_value")
        return _int(body, "logprobs", 0, COMPLETIONS_MAX_LOGPROBS)
    top = _int(body, "top_logprobs", 0, CHAT_MAX_TOP_LOGPROBS)
    if not _bool(body, "logprobs", False):
        if top is not None:
            raise invalid("top_logprobs", "needs logprobs: true")
        return None
    return top or 0


def sampling_request(body: Dict[str, Any], limits: Limits, *, chat: bool = False) -> SamplingRequest:
    """The shared fields (logprobs as the endpoint spells them); refuses the OpenAI fields the
    engine cannot honour."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise invalid("model", f"must be a string, not {_type_name(model)}", "invalid_type")
    n = _int(body, "n", 1, 2**31)
    if n is not None and n != 1:
        raise invalid("n", f"only n = 1 is supported (one completion per request), not {n}",
                      "unsupported_value")
    logprobs = _logprobs(body, chat)
    if body.get("best_of") not in (None, 1):
        raise invalid("best_of", "only best_of = 1 is supported", "unsupported_value")
    if body.get("echo") not in (None, False):
        raise invalid("echo", "echo is not supported", "unsupported_value")
    if body.get("suffix") is not None:
        raise invalid("suffix", "suffix (fill in the middle) is not supported",
                      "unsupported_value")
    max_tokens = _int(body, "max_tokens", 1, limits.max_tokens)
    if "max_completion_tokens" in body and body["max_completion_tokens"] is not None:
        max_tokens = _int(body, "max_completion_tokens", 1, limits.max_tokens)
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True)
    seed = _int(body, "seed", 0, _SEED_LIMIT - 1)
    if seed is None:
        seed = secrets.randbelow(_SEED_LIMIT)
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, dict):
            raise invalid("stream_options", "must be an object", "invalid_type")
        include_usage = _bool(options, "include_usage", False)
    # An extension (vLLM spells it the same): keep generating after the end-of-text token.
    stop_at_eos = not _bool(body, "ignore_eos", False)
    presence = _number(body, "presence_penalty", 0.0, -PENALTY_LIMIT, PENALTY_LIMIT)
    frequency = _number(body, "frequency_penalty", 0.0, -PENALTY_LIMIT, PENALTY_LIMIT)
    return SamplingRequest(model, max_tokens, temperature, top_p, seed, _stop(body), stream,
                           include_usage, stop_at_eos, logprobs, presence, frequency,
                           _logit_bias(body))


def completion_prompt(body: Dict[str, Any]):
    """The completions prompt: a string, a list of one string, or a list of token ids."""
    prompt = body.get("prompt")
    if prompt is None:
        raise invalid("prompt", "is required", "missing_field")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        if len(prompt) == 1 and isinstance(prompt[0], str):
            return prompt[0]
        if prompt and all(isinstance(p, str) for p in prompt):
            raise invalid("prompt", f"a list of {len(prompt)} prompts: batched prompts are not "
                          "supported, send one request per prompt", "unsupported_value")
        if prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return list(prompt)
    raise invalid("prompt", "must be a string, a list of one string, or a non-empty list of "
                  "token ids", "invalid_type")


def chat_messages(body: Dict[str, Any]) -> List[Dict[str, Any]]:
    messages = body.get("messages")
    if messages is None:
        raise invalid("messages", "is required", "missing_field")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "must be a non-empty list of messages", "invalid_type")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise invalid(where, "must be an object with role and content", "invalid_type")
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise invalid(f"{where}.role", "must be a non-empty string", "invalid_type")
        content = m.get("content")
        if isinstance(content, list):  # content parts: text only
            texts = []
            for part in content:
                if not (isinstance(part, dict) and part.get("type") == "text"
                        and isinstance(part.get("text"), str)):
                    raise invalid(f"{where}.content", "only text content parts are supported",
                                  "unsupported_value")
                texts.append(part["text"])
            content = "".join(texts)
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise invalid(f"{where}.content", f"must be a string, not {_type_name(content)}",
                          "invalid_type")
        out.append({**m, "role": role, "content": content})
    return out
