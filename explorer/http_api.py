"""The JSON API beside the page: plain FastAPI routes on the server Gradio runs on, same host and port.

Why: an event through Gradio's queue costs 11-14 ms of the server's CPU even when its function does nothing, and
keeps a class's p95 above 400 ms on 2 cores; a plain route costs about 0.5 ms (docs/speed.md). The Gradio endpoints
stay for gradio_client users.

A second door into the same house: the body becomes the one `Request` (`Request.from_api`, as Gradio's
/translate_trace builds it), runs through the one `ModelService` (its result cache, its batching, its worker
processes) and answers with the same `trace_json`. Every failure leaves as one shape, a 4xx or a 503 whose JSON is
`{"error": {"field": <the argument at fault, or null>, "message": <what is wrong>}}`:

    400  the body is not JSON, or not a JSON object          413  the body is larger than MAX_BODY_BYTES
    415  the body is not sent as application/json            422  a value the request cannot use (the field named)
    503  the server's waiting work is full: Retry-After

    demo.launch(app_kwargs={"lifespan": adding_routes_at_start(ui)})  # as app.py launches the page
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio
import orjson
from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from transformer.decoding.strategies import STRATEGIES

from .api_docs import docs_router
from .api_json import trace_json
from .batching import Overloaded, busy_message
from .features_api import features_router
from .http_api_shapes import ERRORS, MAX_BODY_BYTES, ApiError, JsonBody, JsonRoute
from .request import DEFAULT_MAX_LENGTH, DEVICES, MAX_CHARACTERS, MAX_LINES, MAX_OUTPUT_TOKENS, Request, RequestError
from .session import ALTI, NORMS

log = logging.getLogger("attention-explorer")

PREFIX = "/api/v1"
ROUTE_THREADS = 128  # requests waiting for the model service at once; past its bound the service answers 503 at once
FIRST_SCREEN = frozenset({ALTI, NORMS})  # what the page's first screen reads besides the attention (views/live.py)


class TranslateBody(JsonBody):
    """What to translate and how: the same named arguments as Gradio's /translate_trace."""

    text: str = Field(description=f"one sentence per line: at most {MAX_LINES} lines and {MAX_CHARACTERS:,} "
                                  "characters")
    model: str | None = Field(None, description="a served model's key (GET /api/v1/models); null: the first one")
    device: str = Field("cpu", description=f"one of {list(DEVICES)}")
    strategy: str | None = Field(None, description=f"one of {sorted(STRATEGIES)}; null: the model's recorded "
                                                   "decoding (its model card's)")
    settings: dict[str, Any] | None = Field(None, description='the chosen strategy\'s own settings by name, e.g. '
                                                              '{"beam_size": 4, "length_penalty": 1.0}')
    max_length: int = Field(DEFAULT_MAX_LENGTH, description=f"output pieces at most, 1 to {MAX_OUTPUT_TOKENS}")
    prefix: str | None = Field(None, description="a forced start of every translation")
    heads_off: str | list | None = Field(None, description='heads switched off, "cross 3 2; decoder_self 1 4" '
                                                           "(numbered from 1)")
    source_lang: str | None = Field(None, description="a multilingual model's source language code (NLLB's "
                                                      "eng_Latn, mBART-50's en_XX; GET /api/v1/models lists them); "
                                                      "null: the direction it was converted for")
    target_lang: str | None = Field(None, description="a multilingual model's target language code; null: the "
                                                      "direction it was converted for")


class Trace(BaseModel):
    """One line's compact trace, as the page's live view draws it (explorer/live_payload.py)."""

    model_config = ConfigDict(extra="allow")
    src: list[str]
    tgt: list[str]
    layers: int
    heads: int
    kinds: dict[str, dict] = Field(description="per attention kind: its labels and `q`, the weights as bytes in "
                                               "1/255 steps (layer, head, query, key), zlib-deflated, base64")


class TranslateAnswer(BaseModel):
    """The translation, its summary and per line the compact trace (what Gradio's /translate_trace returns), and
    the key the page hands to its tabs."""

    translation: str
    translations: list[str]
    summary: str = Field(description="what the page shows under the translation (Markdown, the text escaped)")
    model: str
    device: str
    strategy: str
    settings: dict[str, Any]
    milliseconds: float
    notices: list[str]
    other_language: dict | None
    link: str = Field(description="the query string of a link that opens this request in the page")
    traces: list[Trace]
    result_key: str = Field(description="names this result for the page's tabs (kept for a short while)")


class ModelsAnswer(BaseModel):
    models: list[str]
    default: str
    languages: dict[str, list[str]] = Field(description="per multilingual model, the codes source_lang and "
                                                        "target_lang take")


def json_router(ui) -> APIRouter:
    """The routes, answering through the page's `Wiring` (`ui`): its registry, its one ModelService, and the results
    handed to its tabs (`ui.hand_out`)."""
    router = APIRouter(prefix=PREFIX, route_class=JsonRoute, tags=["Attention Explorer"])
    limiter = anyio.CapacityLimiter(ROUTE_THREADS)

    def translate_now(body: TranslateBody) -> dict:
        try:
            request = Request.from_api(ui.registry, body.text, body.model, body.device, body.strategy, body.settings,
                                       body.max_length, body.prefix, body.heads_off,
                                       source_lang=body.source_lang, target_lang=body.target_lang)
            result = ui.service.run(request, FIRST_SCREEN)
        except RequestError as error:
            raise ApiError(422, error.field, str(error)) from None
        except Overloaded as error:
            raise ApiError(503, None, busy_message(error), {"Retry-After": str(error.retry_after)}) from None
        return trace_json(result) | {"result_key": ui.hand_out(result)}

    @router.post("/translate", response_model=None, responses={200: {"model": TranslateAnswer}, **ERRORS},
                 summary="Translate, with the compact trace the page draws")
    async def translate(body: TranslateBody) -> Response:
        """Translates each line of `text` and returns the translation, the summary the page shows, and per line
        the compact trace of every attention kind, layer and head (as Gradio's /translate_trace returns it)."""
        try:
            answer = await anyio.to_thread.run_sync(translate_now, body, limiter=limiter)
        except ApiError:
            raise
        except Exception as error:  # one visitor's failure must not take the server down; never the visitor's
            log.exception("translation failed")
            raise ApiError(500, None, f"Translation failed: {type(error).__name__}.") from error
        return Response(orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")

    @router.get("/models", response_model=ModelsAnswer, summary="The served models")
    async def models() -> dict:
        """The keys `model` takes, the one a request without `model` gets, and each multilingual model's languages."""
        return {"models": sorted(ui.registry.models), "default": ui.registry.default_key,
                "languages": {key: codes for key in sorted(ui.registry.models)
                              if (codes := ui.registry.languages(key))}}

    return router


def add_json_routes(app, ui) -> None:
    """Adds the routes to a launched page's FastAPI app (`demo.app`), once; /openapi.json then lists them."""
    # a flag, not a look for the paths: newer FastAPI lists an included router as one entry of app.router.routes
    if getattr(app.state, "json_routes", False):
        return
    app.state.json_routes = True
    app.include_router(json_router(ui))
    app.include_router(features_router(ui))
    app.include_router(docs_router())
    app.openapi_schema = None  # made again, with the routes, when next asked


def adding_routes_at_start(ui):
    """A lifespan for `demo.launch(app_kwargs={"lifespan": adding_routes_at_start(ui)})`: the routes join the app as
    its server starts, before it answers anything (added after `launch()` returned, a client that began as soon as
    `/` answered could get a 404 from the route for a moment)."""

    @contextlib.asynccontextmanager
    async def lifespan(app):
        add_json_routes(app, ui)
        yield

    return lifespan


__all__ = ["MAX_BODY_BYTES", "PREFIX", "add_json_routes", "adding_routes_at_start", "json_router"]
