"""Asking an atlas about a new sentence: its tokens' nearest corpus tokens, and its queries and keys placed on the
heads' maps. Everything here counts from 0; the command line and the API count layers, heads and positions from 1.

The new sentence runs teacher-forced exactly as the corpus did (extract.py): on the source side over its pieces +
</s>; on the target side over its own greedy translation, so a target token is the position that predicted it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..choices import ChoiceError, checked_choice
from ..core.head_ref import shown
from ..core.probes import ATTENTION_KINDS, SOURCE, TARGET
from ..decoding.translator import Translator
from ..numbers import NumberError, checked_number
from ..unicode_text import check_text
from .corpus import TokenizedCorpus
from .extract import PARTS, extract_batch, part_side
from .index import search
from .maps import place, reference_points
from .reader import Atlas
from .similar import ranked, similarity_matrix
from .store import SIDES, AtlasError

MAX_K = 100  # neighbours one question may ask for


@dataclass
class SentenceVectors:
    """A new sentence's tokens and, for each, what the atlas stores for corpus tokens (extract.py's dict)."""

    pieces: dict[str, list[str]]  # side -> its tokens' pieces
    translation: str
    extracted: dict


@dataclass
class Neighbour:
    sentence: int  # the corpus pair, 0-based
    source: str
    target: str
    side: str
    position: int  # 0-based
    piece: str
    distance: float  # Euclidean, between float16 residual vectors


def sentence_vectors(model, tokenizer, text: str) -> SentenceVectors:
    """Runs `text` teacher-forced over its own greedy translation, every token's queries and keys kept."""
    if not isinstance(text, str) or not text.strip():
        raise AtlasError("sentence must be a non-empty text")
    check_text("sentence", text)  # a TextError naming it, before the tokenizer reads it
    translation = Translator(model, tokenizer).translate(text, strategy="greedy")
    ids = {SOURCE: translation.src_ids, TARGET: translation.tgt_ids}
    offsets = {side: np.array([0, len(ids[side])], np.int64) for side in SIDES}
    corpus = TokenizedCorpus([text], [translation.text], {side: [ids[side]] for side in SIDES}, offsets)
    every = {side: np.arange(len(ids[side]), dtype=np.int64) for side in SIDES}
    extracted = extract_batch(model, corpus, np.array([0]), every)
    pieces = {side: [tokenizer.id_to_piece(i) for i in ids[side]] for side in SIDES}
    return SentenceVectors(pieces, translation.text, extracted)


def atlas_choice(name: str, value, choices) -> None:
    try:
        checked_choice(name, value, choices)
    except ChoiceError as error:
        raise AtlasError(str(error)) from None


def check_question(atlas: Atlas, vectors: SentenceVectors, token: int, layer: int, side: str, k: int) -> None:
    """0-based token and layer; messages count from 1, as the command line and the API do."""
    atlas_choice("side", side, SIDES)
    try:
        checked_number("layer", shown(layer), int, 1, atlas.stack(side).layers)
    except NumberError as error:
        raise AtlasError(f"{error}{atlas.stack_text(side)}") from None
    if layer not in atlas.indexed[side]:
        indexed = ", ".join(str(shown(i)) for i in atlas.indexed[side]) or "none"
        raise AtlasError(f"layer {shown(layer)} is not indexed on the {side} side of this atlas (indexed: {indexed}); "
                         "build one with --layers to include it")
    checked_number("token", shown(token), int, 1, len(vectors.pieces[side]))
    checked_number("k", k, int, 1, min(MAX_K, atlas.tokens[side]))


def neighbours(atlas: Atlas, vectors: SentenceVectors, token: int, layer: int, side: str, k: int) -> list[Neighbour]:
    """The k corpus tokens of `side` whose residual vector after `layer` is nearest to `token`'s, nearest first."""
    check_question(atlas, vectors, token, layer, side, k)
    query = vectors.extracted[f"{side}_hidden"][token, layer]  # float16, as the corpus's vectors are stored
    distances, rows = search(atlas.index(side, layer), query[None], k)
    found = []
    for distance, row in zip(distances[0], rows[0]):
        if row < 0:
            continue
        record = atlas.record(side, int(row))
        pair = atlas.sentence(record["sentence"])
        found.append(Neighbour(record["sentence"], pair[SOURCE], pair[TARGET], side, record["position"],
                               record["piece"], float(distance)))
    return found


def check_head(atlas: Atlas, kind: str, layer: int, head: int) -> None:
    """A 0-based layer and head of `kind`, within that kind's own stack; messages count from 1."""
    atlas_choice("kind", kind, ATTENTION_KINDS)
    shape = atlas.stack(kind)
    try:
        checked_number("layer", shown(layer), int, 1, shape.layers)
        checked_number("head", shown(head), int, 1, shape.heads)
    except NumberError as error:
        raise AtlasError(f"{error}{atlas.stack_text(kind)}") from None


def head_points(atlas: Atlas, kind: str, layer: int, head: int) -> dict:
    """One head's map: per part ("queries", "keys"), the coordinates (n, 2) and each point's token record."""
    check_head(atlas, kind, layer, head)
    maps, projection = atlas.maps(kind)
    head_map = maps[layer][head]
    points = {}
    for part in PARTS:
        side = part_side(kind, part)
        rows = atlas.sample_rows(side)
        span = slice(0, head_map.queries) if part == "queries" else slice(head_map.queries, None)
        records = atlas.records(side).take(rows).select(["sentence", "position", "piece"]).to_pydict()
        points[part] = {"side": side, "coordinates": head_map.coordinates[span], **records}
    return {"projection": projection, **points}


def similar_heads(atlas: Atlas, kind: str, layer: int, head: int) -> list[tuple[int, int, float]]:
    """The other heads of `kind`, most alike first by their maps' neighbourhood overlap (similar.py): (layer, head,
    overlap), 0-based. Computed once per atlas and kind, over that kind's heads only: the kinds' stacks may differ
    in layers and heads, so a head's place in the matrix counts in its own kind's heads per layer."""
    check_head(atlas, kind, layer, head)
    cache = atlas.__dict__.setdefault("_similarity", {})
    if kind not in cache:
        cache[kind] = similarity_matrix(atlas.maps(kind)[0])
    heads = atlas.stack(kind).heads
    return ranked(cache[kind], layer * heads + head, heads)


def placed(atlas: Atlas, vectors: SentenceVectors, kind: str, layer: int, head: int) -> dict:
    """The new sentence's queries and keys of one head, on that head's map: part -> (tokens, 2)."""
    check_head(atlas, kind, layer, head)
    maps, projection = atlas.maps(kind)
    head_map = maps[layer][head]
    reference = None
    if projection != "pca":
        samples = [np.asarray(atlas.samples(kind, part)[layer, head], np.float32) for part in PARTS]
        reference = reference_points(head_map, *samples)
    return {part: place(head_map, np.asarray(vectors.extracted[f"{kind}_{part}"][:, layer, head], np.float32),
                        part, projection, reference) for part in PARTS}
