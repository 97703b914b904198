# SPDX-License-Identifier: Apache-2.0
"""The HTTP side: the OpenAI routes over an :class:`~specla.server.engine.Engine`, as a Starlette
application (``create_app``), with Server-Sent Events for ``stream: true``."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Union

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import specla

from .chat_template import ChatTemplate, ChatTemplateError
from .engine import Engine, Finished, GenerationSpec, Piece, QueueFullError, ShuttingDownError
from .protocol import (APIError, Limits, SamplingRequest, chat_messages, check_body,
                       check_logit_bias_ids, completion_prompt, invalid, sampling_request)

# The completions endpoint's max_tokens when a request gives none (OpenAI's default); chat
# completions default to the server's limit, as OpenAI's chat endpoint has no fixed default.
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


def error_response(err: APIError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status)


def _spec_stats(finished: Finished) -> Optional[Dict[str, Any]]:
    s = finished.spec_stats
    if s is None:
        return None
    return {"steps": s.steps, "drafted": s.drafted, "accepted": s.accepted,
            "generated": s.generated, "mean_accepted_length": s.mean_accepted_length,
            "acceptance_rate": s.acceptance_rate, "plain_steps": s.plain_steps}


def _usage(finished: Finished) -> Dict[str, int]:
    return {"prompt_tokens": finished.prompt_tokens,
            "completion_tokens": finished.completion_tokens,
            "total_tokens": finished.prompt_tokens + finished.completion_tokens}


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def _until_disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _unless_disconnected(request: Request, task: "asyncio.Future") -> bool:
    """Wait for ``task``; when the client disconnects first, cancel it (which aborts its
    generation) and return False."""
    gone = asyncio.ensure_future(_until_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return True
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)  # its generation is aborted by now
    return False


TokenText = Callable[[int], str]


def _completions_logprobs(lps: List[specla.TokenLogprob], name: TokenText,
                          offset: int) -> Dict[str, Any]:
    """The legacy completions form: parallel lists; text_offset counts from `offset`."""
    tokens = [name(lp.token) for lp in lps]
    offsets = []
    for t in tokens:
        offsets.append(offset)
        offset += len(t)
    return {"tokens": tokens, "token_logprobs": [lp.logprob for lp in lps],
            "top_logprobs": [{name(t): v for t, v in lp.top} for lp in lps],
            "text_offset": offsets}


def _chat_logprobs(lps: List[specla.TokenLogprob], name: TokenText, offset: int) -> Dict[str, Any]:
    def entry(token: int, logprob: float) -> Dict[str, Any]:
        text = name(token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}
    return {"content": [{**entry(lp.token, lp.logprob),
                         "top_logprobs": [entry(t, v) for t, v in lp.top]} for lp in lps]}


class _Endpoint:
    """What differs between completions and chat completions: the object names, how a piece
    of text sits in a choice, and how log-probabilities are spelled."""

    def __init__(self, obj: str, chunk_obj: str, id_prefix: str,
                 full_choice: Callable[[str], Dict[str, Any]],
                 piece_choice: Callable[[str], Dict[str, Any]],
                 first_choice: Optional[Dict[str, Any]],
                 logprobs: Callable[[List[specla.TokenLogprob], TokenText, int], Dict[str, Any]],
                 chat: bool) -> None:
        self.obj = obj
        self.chunk_obj = chunk_obj
        self.id_prefix = id_prefix
        self.full_choice = full_choice
        self.piece_choice = piece_choice
        self.first_choice = first_choice  # a chunk sent before the text (the chat role)
        self.logprobs = logprobs
        self.chat = chat


COMPLETIONS = _Endpoint("text_completion", "text_completion", "cmpl-",
                        lambda text: {"text": text},
                        lambda text: {"text": text}, None, _completions_logprobs, False)
CHAT = _Endpoint("chat.completion", "chat.completion.chunk", "chatcmpl-",
                 lambda text: {"message": {"role": "assistant", "content": text}},
                 lambda text: {"delta": {"content": text}},
                 {"delta": {"role": "assistant", "content": ""}}, _chat_logprobs, True)


class Server:
    """The routes' state: the engine, the limits and the chat template."""

    def __init__(self, engine: Engine, limits: Limits,
                 chat_template: Optional[ChatTemplate]) -> None:
        self.engine = engine
        self.limits = limits
        self.chat_template = chat_template
        self.created = int(time.time())

    # ---- request -> generation ----
    async def _body(self, request: Request) -> Dict[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise APIError(400, f"the request body is not valid JSON: {e}",
                           code="invalid_json") from e
        return check_body(body)

    def _sampling_request(self, body: Dict[str, Any], *, chat: bool) -> SamplingRequest:
        """The shared fields, checked, also against the model (its name, its vocabulary)."""
        req = sampling_request(body, self.limits, chat=chat)
        self._check_model(req)
        check_logit_bias_ids(req.logit_bias, self._vocab_size)
        return req

    def _check_model(self, req: SamplingRequest) -> None:
        if req.model is not None and req.model != self.engine.model_name:
            raise APIError(404, f"the model {req.model!r} does not exist; this server serves "
                           f"{self.engine.model_name!r}", param="model",
                           code="model_not_found")

    @property
    def _vocab_size(self) -> int:
        """The ids a request may name (its prompt, its logit_bias): the tokenizer's."""
        return self.engine.model.tokenizer.vocab_size

    def _prompt_ids(self, prompt: Union[str, List[int]], *, add_bos: Optional[bool],
                    param: str) -> List[int]:
        if isinstance(prompt, str):
            ids = self.engine.tokenize(prompt, add_bos=add_bos)
        else:
            vocab = self._vocab_size
            bad = [t for t in prompt if not 0 <= t < vocab]
            if bad:
                raise invalid(param, f"token id {bad[0]} is outside the vocabulary "
                              f"[0, {vocab})")
            ids = prompt
        if not ids:
            raise invalid(param, "the prompt is empty (no tokens)")
        if len(ids) > self.limits.max_prompt_tokens:
            raise invalid(param, f"the prompt has {len(ids)} tokens, more than this server's "
                          f"limit of {self.limits.max_prompt_tokens}", "context_length_exceeded")
        return ids

    def _spec(self, req: SamplingRequest, ids: List[int], default_max: int) -> GenerationSpec:
        return GenerationSpec(ids, req.max_tokens or default_max, req.temperature, req.top_p,
                              req.seed, req.stop, req.stop_at_eos, req.logprobs,
                              req.presence_penalty, req.frequency_penalty, req.logit_bias)

    # ---- routes ----
    async def completions(self, request: Request) -> Response:
        try:
            body = await self._body(request)
            req = self._sampling_request(body, chat=False)
            prompt = completion_prompt(body)
            ids = self._prompt_ids(prompt, add_bos=None, param="prompt")
        except APIError as e:
            return error_response(e)
        spec = self._spec(req, ids, min(COMPLETIONS_DEFAULT_MAX_TOKENS, self.limits.max_tokens))
        return await self._respond(request, req, spec, COMPLETIONS)

    async def chat_completions(self, request: Request) -> Response:
        try:
            body = await self._body(request)
            req = self._sampling_request(body, chat=True)
            messages = chat_messages(body)
            if self.chat_template is None:
                raise APIError(400, f"the model {self.engine.model_name!r} has no chat template "
                               "(no chat_template in its tokenizer_config.json): use "
                               "/v1/completions with a plain prompt", param="messages",
                               code="no_chat_template")
            try:
                text = self.chat_template.render(messages)
            except ChatTemplateError as e:
                raise invalid("messages", str(e)) from e
            # The template writes the special tokens (BOS) itself, as Hugging Face's does.
            ids = self._prompt_ids(text, add_bos=False, param="messages")
        except APIError as e:
            return error_response(e)
        return await self._respond(request, req, self._spec(req, ids, self.limits.max_tokens),
                                   CHAT)

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    async def model(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name != self.engine.model_name:
            return error_response(APIError(404, f"the model {name!r} does not exist", param="model",
                                           code="model_not_found"))
        return JSONResponse(self._model_card())

    def _model_card(self) -> Dict[str, Any]:
        return {"id": self.engine.model_name, "object": "model", "created": self.created,
                "owned_by": "specla"}

    async def health(self, request: Request) -> Response:
        e = self.engine
        status = "shutting_down" if e.shutting_down else "ok"
        return JSONResponse({"status": status, "model": e.model_name, "slots": e.slots,
                             "active": e.active, "free_slots": e.slots - e.active,
                             "queued": e.waiting, "queue_limit": e.queue_limit,
                             "speculative": e.speculative},
                            status_code=503 if e.shutting_down else 200)

    # ---- responses ----
    async def _respond(self, request: Request, req: SamplingRequest, spec: GenerationSpec,
                       kind: _Endpoint) -> Response:
        gen = self.engine.generate(spec)
        # Admission (a wait in the queue, or a refusal) happens at the first item.
        first = asyncio.ensure_future(gen.__anext__())
        if not await _unless_disconnected(request, first):
            await gen.aclose()
            return Response(status_code=499)  # nobody reads it: the client left while waiting
        try:
            item = first.result()
        except BaseException as e:  # noqa: BLE001 - answered as an error body
            await gen.aclose()
            return error_response(_generation_error(e))
        meta = {"id": kind.id_prefix + uuid.uuid4().hex, "created": int(time.time()),
                "model": self.engine.model_name}
        if req.stream:
            return StreamingResponse(self._events(gen, item, req, kind, meta),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        collect = asyncio.ensure_future(_collect(gen, item))
        if not await _unless_disconnected(request, collect):
            return Response(status_code=499)
        try:
            text, finished, lps = collect.result()
        except BaseException as e:  # noqa: BLE001 - answered as an error body
            return error_response(_generation_error(e))
        if finished.finish_reason == "aborted":
            return error_response(_generation_error(ShuttingDownError()))
        logprobs = (kind.logprobs(lps, self.engine.token_text, 0)
                    if req.logprobs is not None else None)
        choice = {"index": 0, **kind.full_choice(text), "logprobs": logprobs,
                  "finish_reason": finished.finish_reason}
        body = {**meta, "object": kind.obj, "choices": [choice], "usage": _usage(finished)}
        stats = _spec_stats(finished)
        if stats is not None:
            body["specla"] = stats
        return JSONResponse(body)

    async def _events(self, gen: AsyncIterator, first: Any, req: SamplingRequest,
                      kind: _Endpoint, meta: Dict[str, Any]) -> AsyncIterator[str]:
        offset = 0  # of the next piece in the text (completions' text_offset)

        def chunk(choice: Optional[Dict[str, Any]], finish_reason: Optional[str] = None,
                  lps: Optional[List[specla.TokenLogprob]] = None, **extra: Any) -> str:
            logprobs = None
            if req.logprobs is not None and lps:
                logprobs = kind.logprobs(lps, self.engine.token_text, offset)
            choices = [] if choice is None else [{"index": 0, **choice, "logprobs": logprobs,
                                                  "finish_reason": finish_reason}]
            return _sse({**meta, "object": kind.chunk_obj, "choices": choices, **extra})

        try:
            if kind.first_choice is not None:
                yield chunk(kind.first_choice)
            item = first
            while True:
                if isinstance(item, Finished):
                    break
                yield chunk(kind.piece_choice(item.text), lps=item.logprobs)
                offset += len(item.text)
                item = await gen.__anext__()
            if item.finish_reason == "aborted":
                yield _sse(_generation_error(ShuttingDownError()).body())
            else:
                extra: Dict[str, Any] = {}
                stats = _spec_stats(item)
                if stats is not None:
                    extra["specla"] = stats
                if req.include_usage:
                    yield chunk(kind.piece_choice(""), item.finish_reason, item.logprobs, **extra)
                    yield chunk(None, usage=_usage(item))
                else:
                    yield chunk(kind.piece_choice(""), item.finish_reason, item.logprobs,
                                usage=_usage(item), **extra)
        except Exception as e:  # noqa: BLE001 - the headers are sent: an error event
            yield _sse(_generation_error(e).body())
        finally:
            await gen.aclose()  # aborts an unfinished generation (a client gone)
        yield "data: [DONE]\n\n"


async def _collect(gen: AsyncIterator, first: Any):
    """The whole generation: its text, the Finished item, and every token's logprobs."""
    lps: List[specla.TokenLogprob] = []
    item = first
    try:
        while not isinstance(item, Finished):
            assert isinstance(item, Piece)
            lps.extend(item.logprobs)
            item = await gen.__anext__()
    finally:
        await gen.aclose()
    return item.text, item, lps + item.logprobs


def _generation_error(e: BaseException) -> APIError:
    if isinstance(e, QueueFullError):
        return APIError(429, "the server is busy: every slot is in use and the wait queue is "
                        "full; retry later", type="server_busy", code="queue_full")
    if isinstance(e, ShuttingDownError):
        return APIError(503, "the server is shutting down", type="server_shutting_down",
                        code="shutting_down")
    if isinstance(e, (specla.InvalidArgumentError, specla.TokenOutOfRangeError)):
        return APIError(400, str(e))
    if isinstance(e, asyncio.CancelledError):
        raise e
    return APIError(500, f"generation failed: {type(e).__name__}: {e}", type="server_error",
                    code="internal_error")


def create_app(engine: Engine, limits: Limits, *, chat_template: Optional[ChatTemplate] = None,
               close_engine: bool = True) -> Starlette:
    """The Starlette application over ``engine``; its shutdown closes the engine (aborting
    what runs, freeing the sessions and the model) unless ``close_engine`` is False."""
    server = Server(engine, limits, chat_template)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if close_engine:
                await asyncio.get_running_loop().run_in_executor(None, engine.close)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = "not_found" if exc.status_code == 404 else None
        return error_response(APIError(exc.status_code, f"{request.method} {request.url.path}: "
                                       f"{exc.detail}", code=code))

    async def server_error(request: Request, exc: Exception) -> Response:
        return error_response(APIError(500, f"internal error: {type(exc).__name__}: {exc}",
                                       type="server_error", code="internal_error"))

    routes = [
        Route("/v1/completions", server.completions, methods=["POST"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/models/{name:path}", server.model, methods=["GET"]),
        Route("/health", server.health, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={HTTPException: http_error, Exception: server_error})
    app.state.server = server
    return app
