"""The dictionary features on the JSON API (docs/features.md), beside /translate and with its error shape:

    GET  /api/v1/features            the served models' dictionaries: point, n, k and metrics
    POST /api/v1/features/steer      a sentence translated greedily as it is, and with one latent removed or scaled
    POST /api/v1/features/explain    the latents whose removal most lowers one piece of a translation
    POST /api/v1/features/read       a sentence's tokens at the point, each with its strongest latents
    POST /api/v1/features/latent     what one latent is: label, contexts, histogram (and promoted pieces)

The same functions as `python -m transformer.features top | steer | explain` (transformer/features/steering.py), on the
served model in this process, so both give the same numbers. Latents count from 0; pieces and positions from 1.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import anyio
from fastapi import APIRouter
from pydantic import Field

from transformer.features import DictionaryError, SavedDictionary, load_dictionary
from transformer.features.catalogue import load_catalogue
from transformer.features.reading import MAX_CONTEXTS, describe, sentence_latents
from transformer.features.steering import MAX_SCALE, Edit, explanation, steer
from transformer.unicode_text import MAX_CHARACTERS, TextError, checked_lines

from .http_api_shapes import ERRORS, ApiError, JsonBody, JsonRoute

PREFIX = "/api/v1/features"
FEATURES_FOLDER = "features"  # checkpoints/<model>/features/<point>/: dictionary.safetensors and config.json
MAX_EXACT = 100  # /explain's latents measured exactly: each is one more pass of the model
MAX_TOP = 20  # /read's latents per token
SENTENCE = f"one sentence on one line, at most {MAX_CHARACTERS:,} characters"
LATENT = "the latent, from 0 to the dictionary's n - 1 (GET /api/v1/features)"


class FeatureBody(JsonBody):
    """What both routes take: the sentence, the model and the dictionary's point."""

    text: str = Field(description=SENTENCE)
    model: str | None = Field(None, description="a served model's key; null: the first one")
    point: str = Field(description="the dictionary's recording point (GET /api/v1/features)")


class SteerBody(FeatureBody):
    latent: int = Field(description=LATENT)
    scale: float = Field(0.0, description=f"its new multiple: 0 removes it, 2 doubles it ({-MAX_SCALE:g} to "
                                          f"{MAX_SCALE:g})")
    positions: list[int] | None = Field(None, description="positions at the point, from 1; null: all")


class ExplainBody(FeatureBody):
    piece: int = Field(description="which piece of the target, from 1 (its </s> last)")
    target: str | None = Field(None, description=f"the translation to explain, {SENTENCE}; null: the model's "
                                                 "greedy one")
    exact: int = Field(10, description=f"how many of the best estimated are measured exactly, 0 to {MAX_EXACT}")


class ReadBody(FeatureBody):
    top: int = Field(3, description=f"latents per token, 1 to {MAX_TOP}")


class LatentBody(JsonBody):
    model: str | None = Field(None, description="a served model's key; null: the first one")
    point: str = Field(description="the dictionary's recording point (GET /api/v1/features)")
    latent: int = Field(description=LATENT)
    contexts: int = Field(8, description=f"its strongest contexts shown, 1 to {MAX_CONTEXTS:,}")


@lru_cache(maxsize=16)
def dictionary_at(folder: str) -> SavedDictionary:
    return load_dictionary(folder)


def folders(translator) -> dict[str, Path]:
    """The model's shipped dictionaries: point -> folder."""
    return folders_in(translator.source)


def folders_in(checkpoint) -> dict[str, Path]:
    """The dictionaries in a checkpoint's folder (None: none): point -> folder."""
    root = Path(checkpoint or "") / FEATURES_FOLDER
    return {f.name: f for f in sorted(root.iterdir()) if (f / "config.json").is_file()} if checkpoint and root.is_dir(
    ) else {}


def served(ui, model: str | None, point: str):
    """(translator, dictionary) for the request, or a 422 naming `model` or `point`."""
    key = model if model is not None else ui.registry.default_key
    if key not in ui.registry.models:
        raise ApiError(422, "model", f"model must be one of {sorted(ui.registry.models)}, got {key!r}")
    translator = ui.registry.get(key).translator
    found = folders(translator)
    if point not in found:
        raise ApiError(422, "point", f"model {key!r} has no dictionary at {point!r}; it has {sorted(found)}")
    try:
        return translator, dictionary_at(str(found[point]))
    except DictionaryError as error:
        raise ApiError(422, "point", str(error)) from None


def sentence(text: str, field: str = "text") -> str:
    """One sentence to translate (or a translation), checked as every surface checks it; a 422 naming `field`."""
    try:
        return checked_lines(field, text, 1)[0]
    except (TextError, ValueError) as error:
        raise ApiError(422, field, str(error)) from None


def steer_now(ui, body: SteerBody) -> dict:
    translator, saved = served(ui, body.model, body.point)
    if body.positions is not None and any(p < 1 for p in body.positions):
        raise ApiError(422, "positions", f"positions count from 1, got {body.positions}")
    positions = None if body.positions is None else tuple(p - 1 for p in body.positions)
    try:
        result = steer(translator, saved, sentence(body.text), [Edit(body.latent, body.scale, positions)],
                       strategy="greedy")
    except DictionaryError as error:
        field = next((f for f in ("latent", "scale", "positions") if str(error).startswith(f)), None)
        raise ApiError(422, field, str(error)) from None
    return {"text": body.text, "point": body.point, "latent": body.latent, "scale": body.scale,
            "before": result.before, "after": result.after}


def explain_now(ui, body: ExplainBody) -> dict:
    translator, saved = served(ui, body.model, body.point)
    text = sentence(body.text)
    target = None if body.target is None else sentence(body.target, "target")
    if not 0 <= body.exact <= MAX_EXACT:
        raise ApiError(422, "exact", f"exact must be in [0, {MAX_EXACT}], got {body.exact}")
    try:
        return {"text": text, **explanation(translator, saved, text, target, body.piece, body.exact)}
    except DictionaryError as error:
        raise ApiError(422, "piece", str(error)) from None


def read_now(ui, body: ReadBody) -> dict:
    """The sentence translated greedily and read at the point: an encoder point on its source, a decoder point
    teacher-forced on that translation (each position: the piece it predicted)."""
    translator, saved = served(ui, body.model, body.point)
    text = sentence(body.text)
    if not 1 <= body.top <= MAX_TOP:
        raise ApiError(422, "top", f"top must be in [1, {MAX_TOP}], got {body.top}")
    translation = translator.translate(text, strategy="greedy")
    read = sentence_latents(translator, saved, translator.source_ids(text)[0], translation.tgt_ids)
    return {"text": text, "translation": translation.text, "point": body.point, "side": read.side,
            "numbering": "latents from 0; positions from 1",
            "tokens": [{"position": p + 1, "piece": piece, "latents": [{"latent": j, "activation": round(v, 6)} for
                                                                      j, v in read.top_of(p, body.top)]}
                       for p, piece in enumerate(read.tokens)]}


def latent_now(ui, body: LatentBody) -> dict:
    translator, saved = served(ui, body.model, body.point)
    try:
        catalogue = catalogue_at(str(folders(translator)[body.point]), saved.dictionary.config.n)
        return describe(translator, saved, catalogue, body.latent, body.contexts)
    except DictionaryError as error:
        field = next((f for f in ("latent", "contexts") if str(error).startswith(f)), "point")
        raise ApiError(422, field, str(error)) from None


@lru_cache(maxsize=16)
def catalogue_at(folder: str, n: int):
    return load_catalogue(folder, n)


def features_router(ui) -> APIRouter:
    router = APIRouter(prefix=PREFIX, route_class=JsonRoute, tags=["Dictionary features"])

    @router.get("", summary="The served models' dictionaries")
    async def listing() -> dict:
        answer = {}
        for key, model in ui.registry.models.items():
            answer[key] = [{"point": point, **{k: v for k, v in load_config(folder).items() if k != "point"}}
                           for point, folder in folders(model.translator).items()]
        return {"models": answer}

    @router.post("/steer", responses=ERRORS, summary="Translate with one latent removed or scaled")
    async def steer_route(body: SteerBody) -> dict:
        return await anyio.to_thread.run_sync(steer_now, ui, body)

    @router.post("/explain", responses=ERRORS, summary="The latents that cause one piece of a translation")
    async def explain_route(body: ExplainBody) -> dict:
        return await anyio.to_thread.run_sync(explain_now, ui, body)

    @router.post("/read", responses=ERRORS, summary="A sentence's tokens with their strongest latents")
    async def read_route(body: ReadBody) -> dict:
        return await anyio.to_thread.run_sync(read_now, ui, body)

    @router.post("/latent", responses=ERRORS, summary="What one latent is: label, contexts, histogram")
    async def latent_route(body: LatentBody) -> dict:
        return await anyio.to_thread.run_sync(latent_now, ui, body)

    return router


def load_config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))
