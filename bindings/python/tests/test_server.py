# SPDX-License-Identifier: Apache-2.0
"""specla.server against real HTTP clients (httpx and the official openai client): outputs equal
to the package's own generate(), streaming equal to non-streaming, concurrency equal to
sequential runs, OpenAI-style refusals, the slot of a client that left going back, a full queue
answered 429, and the command line's chat template and graceful shutdown."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, List

import pytest

for _dep in ("starlette", "uvicorn", "jinja2", "httpx", "openai"):
    pytest.importorskip(_dep, reason=f"the server tests need {_dep} "
                        f"(pip install 'specla[server]' httpx openai)")

import httpx  # noqa: E402
import openai  # noqa: E402
import uvicorn  # noqa: E402

import specla  # noqa: E402
from specla.server import ChatTemplate, Engine, Limits, create_app  # noqa: E402

from conftest import PYCODE  # noqa: E402

MODEL = PYCODE.name
PROMPTS = ["def fibonacci(n):", "import os\n\ndef list_files(path):", "class Stack:\n",
           "def is_prime(n):", "for i in range(10):\n", "def quicksort(items):",
           "# Read a JSON file\nimport json\n", "def main():\n    args ="]
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}# {{ m['role'] }}: {{ m['content'] }}\n"
                 "{% endfor %}{% if add_generation_prompt %}# assistant:{% endif %}")
MAX_PROMPT_TOKENS = 64


class LiveServer:
    """The application on uvicorn in a thread of this process, on a free port of 127.0.0.1."""

    def __init__(self, engine: Engine, limits: Limits, template=None) -> None:
        self.engine = engine
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = create_app(engine, limits, chat_template=template)
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]},
                                       daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "no server"
            time.sleep(0.02)
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def health(self) -> dict:
        return self.client.get("/health").json()

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(15)
        assert not self.thread.is_alive()
        assert self.engine.closed  # the application's shutdown closed the sessions


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> ChatTemplate:
    folder = tmp_path_factory.mktemp("chat")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}))
    t = ChatTemplate.from_checkpoint(str(folder))
    assert t is not None
    return t


@pytest.fixture(scope="module")
def live(model: specla.Model, template: ChatTemplate) -> Iterator[LiveServer]:
    s = LiveServer(Engine(model, slots=4, queue=8), Limits(MAX_PROMPT_TOKENS, 256), template)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def oai(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0)


def reference(model: specla.Model, prompt, **kwargs) -> specla.GenerationResult:
    with specla.Session(model) as s:
        return specla.generate(s, prompt, **kwargs)


def complete(live: LiveServer, **body) -> dict:
    r = live.client.post("/v1/completions", json={"model": MODEL, "temperature": 0, **body})
    assert r.status_code == 200, r.text
    return r.json()


def sse_events(response: httpx.Response) -> List[dict]:
    events = []
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: "):]
        if data == "[DONE]":
            return events
        events.append(json.loads(data))
    raise AssertionError("the stream ended without data: [DONE]")


# ---- results ----
def test_models_and_health(live: LiveServer) -> None:
    models = live.client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == [MODEL]
    assert live.client.get(f"/v1/models/{MODEL}").json()["id"] == MODEL
    h = live.health()
    assert h["status"] == "ok" and h["slots"] == 4 and h["free_slots"] == 4
    assert h["speculative"] is True


def test_greedy_completion_equals_generate(live: LiveServer, model: specla.Model) -> None:
    body = complete(live, prompt=PROMPTS[0], max_tokens=24)
    ref = reference(model, PROMPTS[0], max_tokens=24)
    choice = body["choices"][0]
    assert choice["text"] == ref.text
    assert choice["finish_reason"] == "length" and len(ref.tokens) == 24
    assert body["object"] == "text_completion" and body["model"] == MODEL
    assert body["usage"] == {"prompt_tokens": ref.prompt_tokens, "completion_tokens": 24,
                             "total_tokens": ref.prompt_tokens + 24}
    stats = body["specla"]  # speculative decoding is on by default
    assert stats["steps"] >= 1 and stats["generated"] == 24
    assert stats["accepted"] <= stats["drafted"]
    # Steps the gate took plain (speculation measured slower) are not verification passes.
    assert stats["mean_accepted_length"] == pytest.approx((24 - stats["plain_steps"]) / stats["steps"])


def test_stop_string_and_token_prompt(live: LiveServer, model: specla.Model) -> None:
    ref = reference(model, PROMPTS[0], max_tokens=40, stop=["\n\n", "return"])
    body = complete(live, prompt=PROMPTS[0], max_tokens=40, stop=["\n\n", "return"])
    assert body["choices"][0]["text"] == ref.text
    expected = "stop" if ref.finish_reason in ("stop", "eos") else "length"
    assert body["choices"][0]["finish_reason"] == expected
    ids = model.tokenizer.encode(PROMPTS[1])
    by_ids = complete(live, prompt=ids, max_tokens=12)
    assert by_ids["choices"][0]["text"] == complete(live, prompt=[PROMPTS[1]],
                                                    max_tokens=12)["choices"][0]["text"]


def test_stream_equals_non_stream(live: LiveServer) -> None:
    full = complete(live, prompt=PROMPTS[2], max_tokens=20)
    with live.client.stream("POST", "/v1/completions",
                            json={"prompt": PROMPTS[2], "max_tokens": 20, "temperature": 0,
                                  "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert "".join(e["choices"][0]["text"] for e in events) == full["choices"][0]["text"]
    assert [e["choices"][0]["finish_reason"] for e in events][-1] == "length"
    assert all(e["choices"][0]["finish_reason"] is None for e in events[:-1])
    assert events[-1]["usage"] == full["usage"] and "specla" in events[-1]


def test_openai_client(live: LiveServer, oai: openai.OpenAI, model: specla.Model) -> None:
    ref = reference(model, PROMPTS[3], max_tokens=16)
    c = oai.completions.create(model=MODEL, prompt=PROMPTS[3], max_tokens=16, temperature=0)
    assert c.choices[0].text == ref.text and c.usage.completion_tokens == 16
    pieces = [ch.choices[0].text for ch in oai.completions.create(
        model=MODEL, prompt=PROMPTS[3], max_tokens=16, temperature=0, stream=True)
        if ch.choices]
    assert "".join(pieces) == ref.text
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        oai.completions.create(model="gpt-4", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError, match="only n = 1"):
        oai.completions.create(model=MODEL, prompt="x", max_tokens=1, n=2)


def test_chat_completion(live: LiveServer, oai: openai.OpenAI, model: specla.Model,
                         template: ChatTemplate) -> None:
    messages = [{"role": "system", "content": "You write Python."},
                {"role": "user", "content": "def add(a, b):"}]
    ids = model.tokenizer.encode(template.render(messages), add_bos=False)
    ref = reference(model, ids, max_tokens=16)
    c = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=16,
                                    temperature=0)
    assert c.object == "chat.completion"
    assert c.choices[0].message.role == "assistant"
    assert c.choices[0].message.content == ref.text
    assert c.usage.prompt_tokens == len(ids)
    chunks = list(oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=16,
                                              temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == ref.text
    assert chunks[-1].usage.completion_tokens == c.usage.completion_tokens


def test_seeded_sampling_repeats(live: LiveServer) -> None:
    body = {"prompt": PROMPTS[4], "max_tokens": 16, "temperature": 0.9, "top_p": 0.95,
            "seed": 1234}
    a, b = complete(live, **body), complete(live, **body)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]


def test_concurrent_requests_equal_sequential(live: LiveServer) -> None:
    sequential = [complete(live, prompt=p, max_tokens=24)["choices"][0]["text"]
                  for p in PROMPTS]
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        concurrent = list(pool.map(
            lambda p: complete(live, prompt=p, max_tokens=24)["choices"][0]["text"], PROMPTS))
    assert concurrent == sequential
    assert live.health()["free_slots"] == 4


# ---- refusals ----
def _error(r: httpx.Response, status: int, param=None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        assert err["param"] == param
    return err


@pytest.mark.parametrize("body, param", [
    ({"prompt": "x", "max_tokens": "5"}, "max_tokens"),
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "max_tokens": 10**6}, "max_tokens"),
    ({"prompt": "x", "max_tokens": 2.5}, "max_tokens"),
    ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "temperature": 2.5}, "temperature"),
    ({"prompt": "x", "top_p": 0}, "top_p"),
    ({"prompt": "x", "seed": -1}, "seed"),
    ({"prompt": "x", "stop": 5}, "stop"),
    ({"prompt": "x", "stop": ["a", 1]}, "stop"),
    ({"prompt": "x", "stream": "yes"}, "stream"),
    ({"prompt": 5}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"),
    ({"prompt": [1, 10**9]}, "prompt"),
    ({}, "prompt"),
    ({"prompt": "x", "n": 2}, "n"),
    ({"prompt": "x", "logprobs": 6}, "logprobs"),
    ({"prompt": "x", "logprobs": True}, "logprobs"),
    ({"prompt": "x", "top_logprobs": 2}, "top_logprobs"),
    ({"prompt": "x", "model": 7}, "model"),
    ({"prompt": "x", "presence_penalty": 2.5}, "presence_penalty"),
    ({"prompt": "x", "presence_penalty": "high"}, "presence_penalty"),
    ({"prompt": "x", "frequency_penalty": -2.01}, "frequency_penalty"),
    ({"prompt": "x", "logit_bias": [[5, 1]]}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"five": 1}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"-1": 1}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"1.5": 1}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"5": 101}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"5": "up"}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"7": 1, "07": 2}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"10000000": 1}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {str(i): 1 for i in range(301)}}, "logit_bias"),
])
def test_invalid_fields(live: LiveServer, body: dict, param: str) -> None:
    _error(live.client.post("/v1/completions", json=body), 400, param)


def test_logit_bias_outside_the_vocabulary(live: LiveServer, model: specla.Model) -> None:
    vocab = model.tokenizer.vocab_size
    err = _error(live.client.post("/v1/completions", json={
        "prompt": "x", "logit_bias": {str(vocab): 5}}), 400, "logit_bias")
    assert str(vocab) in err["message"]
    complete(live, prompt="x", max_tokens=1, logit_bias={str(vocab - 1): 5})  # the last id


def test_logit_bias_forces_a_token(live: LiveServer, model: specla.Model) -> None:
    forced = 1234
    body = complete(live, prompt=PROMPTS[0], max_tokens=5, logit_bias={str(forced): 100})
    assert body["choices"][0]["text"] == model.tokenizer.decode([forced] * 5)
    assert body["usage"]["completion_tokens"] == 5


def test_penalties_and_bias_equal_generate(live: LiveServer, model: specla.Model) -> None:
    prompt = "a = 1\nb = 2\na = 1\nb = 2\na = 1\n"
    plain = complete(live, prompt=prompt, max_tokens=24)["choices"][0]["text"]
    fields = {"presence_penalty": 1.5, "frequency_penalty": 0.5, "logit_bias": {"17": -3.5}}
    body = complete(live, prompt=prompt, max_tokens=24, **fields)
    # The server counts the whole context (penalty_last_n=-1), as the README says.
    ref = reference(model, prompt, max_tokens=24, presence_penalty=1.5, frequency_penalty=0.5,
                    penalty_last_n=-1, logit_bias={17: -3.5})
    assert body["choices"][0]["text"] == ref.text != plain
    with live.client.stream("POST", "/v1/completions", json={
            "prompt": prompt, "max_tokens": 24, "temperature": 0, "stream": True,
            **fields}) as r:
        assert r.status_code == 200
        events = sse_events(r)
    assert "".join(e["choices"][0]["text"] for e in events) == ref.text


def test_completion_logprobs(live: LiveServer, model: specla.Model) -> None:
    """The legacy form: the library's log-probabilities per token, named by their text, the
    same in a stream as in one response, and the greedy token the most likely one."""
    ref = reference(model, PROMPTS[0], max_tokens=12, logprobs=True, top_logprobs=3)
    assert ref.logprobs is not None and len(ref.logprobs) == 12
    body = complete(live, prompt=PROMPTS[0], max_tokens=12, logprobs=3)
    lp = body["choices"][0]["logprobs"]
    names = [model.tokenizer.decode([t.token]) for t in ref.logprobs]
    assert lp["tokens"] == names
    assert lp["token_logprobs"] == pytest.approx([t.logprob for t in ref.logprobs], abs=1e-5)
    assert "".join(lp["tokens"]) == body["choices"][0]["text"]
    assert lp["text_offset"] == [sum(len(n) for n in names[:i]) for i in range(len(names))]
    for top, t in zip(lp["top_logprobs"], ref.logprobs):
        assert len(top) <= 3  # two ids may share a text
        assert max(top.values()) == pytest.approx(t.logprob, abs=1e-5)  # greedy: the top one
    with live.client.stream("POST", "/v1/completions",
                            json={"prompt": PROMPTS[0], "max_tokens": 12, "temperature": 0,
                                  "logprobs": 3, "stream": True}) as r:
        events = sse_events(r)
    streamed = [tok for e in events if e["choices"][0]["logprobs"]
                for tok in e["choices"][0]["logprobs"]["tokens"]]
    assert streamed == names
    assert complete(live, prompt=PROMPTS[0], max_tokens=2)["choices"][0]["logprobs"] is None


def test_chat_logprobs(live: LiveServer, oai: openai.OpenAI, model: specla.Model,
                       template: ChatTemplate) -> None:
    messages = [{"role": "user", "content": "def add(a, b):"}]
    ids = model.tokenizer.encode(template.render(messages), add_bos=False)
    ref = reference(model, ids, max_tokens=8, logprobs=True, top_logprobs=2)
    c = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=8,
                                    temperature=0, logprobs=True, top_logprobs=2)
    content = c.choices[0].logprobs.content
    assert [e.logprob for e in content] == pytest.approx([t.logprob for t in ref.logprobs],
                                                         abs=1e-5)
    for e, t in zip(content, ref.logprobs):
        assert e.token == model.tokenizer.decode([t.token])
        assert e.bytes == list(e.token.encode("utf-8"))
        assert [x.logprob for x in e.top_logprobs] == pytest.approx([v for _, v in t.top],
                                                                    abs=1e-5)
    _error(live.client.post("/v1/chat/completions",
                            json={"messages": messages, "top_logprobs": 2}), 400, "top_logprobs")
    _error(live.client.post("/v1/chat/completions",
                            json={"messages": messages, "logprobs": True, "top_logprobs": 21}),
           400, "top_logprobs")


def test_malformed_requests(live: LiveServer) -> None:
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        _error(live.client.post("/v1/completions", content=raw), 400)
        _error(live.client.post("/v1/chat/completions", content=raw), 400)
    _error(live.client.post("/v1/chat/completions", json={"messages": "hi"}), 400, "messages")
    _error(live.client.post("/v1/chat/completions",
                            json={"messages": [{"role": "user", "content": 3}]}), 400)
    _error(live.client.get("/v1/nothing"), 404)
    _error(live.client.get("/v1/completions"), 405)


def test_unknown_model(live: LiveServer) -> None:
    err = _error(live.client.post("/v1/completions", json={"model": "nope", "prompt": "x"}), 404,
                 "model")
    assert err["code"] == "model_not_found"
    _error(live.client.post("/v1/chat/completions",
                            json={"model": "nope", "messages": [{"role": "user",
                                                                 "content": "x"}]}), 404)
    _error(live.client.get("/v1/models/nope"), 404)


def test_oversized_prompt(live: LiveServer) -> None:
    err = _error(live.client.post("/v1/completions", json={"prompt": "x = 1\n" * 200}), 400,
                 "prompt")
    assert err["code"] == "context_length_exceeded" and str(MAX_PROMPT_TOKENS) in err["message"]
    assert live.health()["free_slots"] == 4


def test_chat_without_template(model: specla.Model) -> None:
    s = LiveServer(Engine(model, slots=1, queue=0), Limits(64, 16))
    try:
        err = _error(s.client.post("/v1/chat/completions",
                                   json={"messages": [{"role": "user", "content": "hi"}]}), 400)
        assert "no chat template" in err["message"]
    finally:
        s.stop()


# ---- slots, queue, disconnects ----
def _wait(pred, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_disconnect_frees_the_slot_and_full_queue_is_429(model: specla.Model) -> None:
    s = LiveServer(Engine(model, slots=1, queue=1, speculative=False), Limits(64, 100000))
    try:
        endless = {"prompt": "def f():", "max_tokens": 100000, "ignore_eos": True,
                   "temperature": 0, "stream": True}
        with httpx.Client(base_url=s.url, timeout=30) as streaming:
            with streaming.stream("POST", "/v1/completions", json=endless) as r:
                assert r.status_code == 200
                lines = r.iter_lines()  # kept: dropping the iterator closes the connection
                next(lines)  # generating: the one slot is taken
                assert s.health()["free_slots"] == 0
                with ThreadPoolExecutor(1) as pool:
                    queued = pool.submit(s.client.post, "/v1/completions",
                                         json={"prompt": "x", "max_tokens": 4})
                    _wait(lambda: s.health()["queued"] == 1, "the second request waits")
                    err = _error(s.client.post("/v1/completions",
                                               json={"prompt": "x", "max_tokens": 4}), 429)
                    assert err["code"] == "queue_full"
                    r.close()  # the client leaves mid-stream
                    streaming.close()
                    assert queued.result(timeout=20).status_code == 200
        _wait(lambda: s.health()["free_slots"] == 1, "the slot comes back")
        assert complete(s, prompt="x", max_tokens=4)["usage"]["completion_tokens"] >= 1
    finally:
        s.stop()


def test_non_streaming_disconnect_frees_the_slot_and_the_queue_place(
        model: specla.Model) -> None:
    s = LiveServer(Engine(model, slots=1, queue=1, speculative=False), Limits(64, 100000))
    endless = {"prompt": "def f():", "max_tokens": 100000, "ignore_eos": True}

    def leave_after(timeout: float) -> None:
        with httpx.Client(base_url=s.url, timeout=timeout) as leaving:
            with pytest.raises(httpx.ReadTimeout):
                leaving.post("/v1/completions", json=endless)
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(leave_after, 1.5)
            _wait(lambda: s.health()["free_slots"] == 0, "the first request runs")
            leave_after(0.3)  # leaves while waiting in the queue
            _wait(lambda: s.health()["queued"] == 0, "the queue place comes back")
            running.result()
        _wait(lambda: s.health()["free_slots"] == 1, "the slot comes back")
    finally:
        s.stop()


# ---- the command line ----
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_command_line_chat_and_graceful_shutdown(tmp_path: Path, sig: int) -> None:
    folder = tmp_path / "pycode-chat"  # the demo checkpoint with a chat template
    folder.mkdir()
    for f in PYCODE.iterdir():
        (folder / f.name).symlink_to(f)
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "specla.server", "--model", str(folder),
                             "--port", str(port), "--slots", "2", "--threads", "1",
                             "--max-tokens", "100000", "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert proc.poll() is None, proc.stdout.read().decode()
            try:
                return httpx.get(url + "/health").status_code == 200
            except httpx.TransportError:
                return False
        _wait(up, "the server starts", 30)
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        c = client.chat.completions.create(model="pycode-chat", max_tokens=8, temperature=0,
                                           messages=[{"role": "user", "content": "hi"}])
        assert c.choices[0].message.content and c.usage.completion_tokens <= 8
        with httpx.Client(base_url=url, timeout=30) as h:
            with h.stream("POST", "/v1/completions",
                          json={"prompt": "def f():", "max_tokens": 100000, "ignore_eos": True,
                                "temperature": 0, "stream": True}) as r:
                assert r.status_code == 200
                lines = r.iter_lines()
                next(lines)
                proc.send_signal(sig)  # mid-generation
                rest = [line for line in lines if line]
        assert rest[-1] == "data: [DONE]" and "shutting down" in rest[-2]
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
