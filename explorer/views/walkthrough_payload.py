"""The walk-through as JSON: every stage's named, labelled numbers at every layer and head, numbered from 1 (stages,
the piece, the step, layers and heads) like the rest of the API. The API sends them at 6 decimals (`walk_json`); the
page gets them compactly (`walk_payload`): every array once, as float16 (float32 where float16 would overflow; keys,
values and large matrices as int8 times one scale) little-endian bytes in one binary block the stages point into; the
step's logits over the whole vocabulary; the overview's blocks; and the glossary entries of the terms its stages use.
The words and the binary block each go deflated and base64-encoded (the words shrink to a seventh, the numbers by a
fifth), beside the walk's header in the clear. That is everything the browser draws (static/walk_data.js inflates it,
walk_render.js draws it), so moving between stages, layers and heads never asks the server."""
from __future__ import annotations

import base64
import json
import math
import zlib

import numpy as np

from transformer.core.head_ref import shown

from ..glossary import definition

# the overview: the encoder stack beside the decoder stack, each block's operations (groups) in the model's order
BLOCKS = (("text", "encoder", "Pieces", "the sentence cut into pieces and ids"),
          ("input", "encoder", "Into the encoder", "embedding × scale + positional encoding"),
          ("encoder", "encoder", "Encoder layer", "self-attention, then feed-forward, every source piece at once"),
          ("target", "decoder", "Into the decoder", "the pieces so far: embedding × scale + positional encoding"),
          ("decoder", "decoder", "Decoder layer",
           "masked self-attention, then cross-attention to the encoder's output, then feed-forward"),
          ("output", "decoder", "Next-piece probabilities", "final norm, output projection, softmax, the choice"))
GROUPS = {"self": "self-attention", "cross": "cross-attention ← encoder output", "ff": "feed-forward",
          "layers": "every layer", "final": "final norm", "output": "logits → softmax → choice"}
CONTROL_TERMS = ("layer picker", "pin", "predict first")  # the walk's own controls: their hover text
FLOAT16_MAX = 65504.0
# every position's keys and values (positions x d_k) at every layer and head are most of the payload: they, and any
# matrix larger than LARGE_MATRIX, go as whole numbers in [-127, 127] times one scale (to within half a step), masked
# scores as -128
QUANTISED = ("keys", "values")
LARGE_MATRIX = 256
LEVELS = 127
MASKED = -128


def rounded(value, digits: int):
    """A float for JSON: -inf/inf/nan as text ("-inf"), else rounded to `digits` decimals."""
    value = float(value)
    if not math.isfinite(value):
        return "-inf" if value < 0 else ("inf" if value > 0 else "nan")
    return round(value, digits)


def plain(values, digits: int = 6):
    if isinstance(values, np.ndarray):
        return rounded(values, digits) if values.ndim == 0 else [plain(v, digits) for v in values]
    if isinstance(values, (list, tuple)):
        return [plain(v, digits) for v in values]
    if isinstance(values, (bool, np.bool_)):
        return bool(values)
    if isinstance(values, (int, np.integer)):
        return int(values)
    if isinstance(values, (float, np.floating)):
        return rounded(values, digits)
    return values


def numbers_json(n, encode) -> dict:
    return {"name": n.name, "label": n.label, "kind": n.kind, "values": encode(n), "rows": n.rows, "cols": n.cols,
            "axes": list(n.axes), **({"note": n.note} if n.note else {})}


def stage_fields(stage, encode) -> dict:
    return {"title": stage.title, "text": stage.text, "why": stage.why, "ask": stage.ask,
            "numbers": [numbers_json(n, encode) for n in stage.numbers]}


def where(variants, index: int, heads: int) -> dict:
    """Which layer and head (numbered from 1) version `index` of a stage's variants is."""
    if variants.per == "layer":
        return {"layer": shown(index)}
    layer, head = divmod(index, heads)
    return {"layer": shown(layer), "head": shown(head)}


def walk_header(walk) -> dict:
    a = walk.architecture
    return {"source": walk.source, "translation": walk.text, "token": shown(walk.token), "step": shown(walk.step),
            "layer": shown(walk.layer), "head": shown(walk.head), "layers": a["n_layers"], "heads": a["n_heads"],
            "token_piece": walk.src_tokens[walk.token], "step_piece": walk.tgt_tokens[walk.step], "architecture": a,
            "src_tokens": walk.src_tokens, "decoder_inputs": walk.decoder_inputs, "tgt_tokens": walk.tgt_tokens}


def walk_json(walk, digits: int = 6) -> dict:
    """A Walkthrough (transformer/analysis/walkthrough/) as JSON, numbered from 1: `stages` at the chosen layer and
    head, each with `per` (None, "layer" or "head") and, where it varies, its `variants` at every layer (and head);
    `logits`, the step's logits over the whole target vocabulary (never-produced pieces "-inf")."""
    def encode(n):
        return plain(n.values, digits)

    heads = walk.architecture["n_heads"]
    stages = []
    for number, (stage, variants) in enumerate(zip(walk.stages, walk.variants), start=1):
        entry = {"number": number, "key": stage.key, "block": stage.block, "group": stage.group,
                 "formula": stage.formula, "module": stage.module, "terms": list(stage.terms),
                 **stage_fields(stage, encode), "per": variants.per}
        if variants.per:
            entry["variants"] = [where(variants, i, heads) | stage_fields(s, encode)
                                 for i, s in enumerate(variants.stages)]
        stages.append(entry)
    return walk_header(walk) | {"stages": stages, "logits": plain(walk.logits, digits),
                              "top_ids": walk.top_ids, "top_pieces": walk.top_pieces}


class Pool:
    """Every numeric array of the payload once, as little-endian float16 (float32 where a value would overflow
    float16; int8 times a scale for keys, values and large matrices) bytes in one block; a stage's vector, row or
    matrix holds its index into `arrays`, each entry the dtype, shape and byte range of its values."""

    def __init__(self):
        self.arrays: list[dict] = []
        self.data = bytearray()
        self.index: dict[tuple, int] = {}

    def add(self, raw: bytes) -> dict:
        """Appends bytes to the block: their {offset, length}."""
        where = {"offset": len(self.data), "length": len(raw)}
        self.data += raw
        return where

    def __call__(self, n):
        if n.kind not in ("vector", "row", "matrix"):
            return plain(n.values)
        values = np.asarray(n.values, dtype=np.float64)
        finite = values[np.isfinite(values)]
        largest = float(np.abs(finite).max()) if finite.size else 0.0
        scale = None
        if n.kind == "matrix" and (values.size > LARGE_MATRIX or n.name in QUANTISED):
            scale = float(f"{(largest / LEVELS or 1.0):.6g}")
            finite_mask = np.isfinite(values)
            dtype, raw = "i8", np.where(finite_mask, np.round(np.where(finite_mask, values, 0.0) / scale),
                                        MASKED).astype("i1").tobytes()
        elif largest < FLOAT16_MAX:
            dtype, raw = "f16", values.astype("<f2").tobytes()
        else:
            dtype, raw = "f32", values.astype("<f4").tobytes()
        key = (dtype, raw, values.shape, scale)
        if key not in self.index:
            self.index[key] = len(self.arrays)
            self.arrays.append({"dtype": dtype, "shape": list(values.shape), **self.add(raw),
                                **({"scale": scale} if scale is not None else {})})
        return self.index[key]


def stage_payload(number: int, stage, variants, pool) -> dict:
    """One stage for the page: the fields every version shares, and `variants` with what differs from the first."""
    versions = [stage_fields(s, pool) for s in variants.stages]
    first = versions[0]
    return {"number": number, "key": stage.key, "block": stage.block, "group": stage.group, "formula": stage.formula,
            "module": stage.module, "terms": list(stage.terms), "per": variants.per,
            "variants": [first] + [difference(version, first) for version in versions[1:]]}


def difference(version: dict, first: dict) -> dict:
    """What a stage's version changes from its first: its words, and its numbers' values alone (as "values", one per
    number) where nothing but the values changed."""
    out = {k: v for k, v in version.items() if k != "numbers" and v != first[k]}
    same_labels = len(version["numbers"]) == len(first["numbers"]) and all(
        {k: v for k, v in a.items() if k != "values"} == {k: v for k, v in b.items() if k != "values"}
        for a, b in zip(version["numbers"], first["numbers"]))
    if not same_labels:
        out["numbers"] = version["numbers"]
    elif version["numbers"] != first["numbers"]:
        out["values"] = [n["values"] for n in version["numbers"]]
    return out


def overview(walk, stages: list[dict]) -> list[dict]:
    a = walk.architecture
    stacks, pieces, inputs = a["stacks"], len(walk.src_tokens), shown(walk.step)
    flowing = {"text": f"{pieces} pieces", "input": f"{pieces} vectors × {a['d_model']}",
               "encoder": f"× {stacks['encoder']['layers']} layers, {pieces} × {a['d_model']}",
               "target": f"{inputs} input(s) × {a['d_model']}",
               "decoder": f"× {stacks['decoder']['layers']} layers, {inputs} × {a['d_model']}",
               "output": f"{a['tgt_vocab_size']} probabilities"}
    blocks = []
    for key, column, title, note in BLOCKS:
        numbers = [s["number"] for s in stages if s["block"] == key]
        groups = []
        for s in stages:
            if s["block"] == key and s["group"] in GROUPS:
                if not groups or groups[-1]["key"] != s["group"]:
                    groups.append({"key": s["group"], "title": GROUPS[s["group"]], "stages": []})
                groups[-1]["stages"].append(s["number"])
        if numbers:
            blocks.append({"key": key, "column": column, "title": title, "note": note, "data": flowing[key],
                           "stages": numbers, "groups": groups})
    return blocks


EXACT_LOGITS = 512


def compact_logits(logits, pool: Pool) -> dict:
    """The step's logits over the whole vocabulary: the EXACT_LOGITS largest as float32 with their ids ("top",
    "exact"); every logit as float16 below the largest ("below", largest - logit), whose rounding error (at most
    2^-11 of the distance) falls on pieces e^distance times less probable than the top one. Both in the pool's block."""
    logits = np.asarray(logits, dtype=np.float64)
    largest = float(np.max(logits))
    top = np.argsort(-logits, kind="stable")[:EXACT_LOGITS]
    below = np.where(np.isfinite(logits), largest - logits, np.inf)
    return {"size": int(logits.size), "largest": largest, "top": top.astype("<i4").tolist(),
            "exact": pool.add(logits[top].astype("<f4").tobytes()), "below": pool.add(below.astype("<f2").tobytes())}


def deflated(raw: bytes) -> str:
    """zlib (what the browser's DecompressionStream("deflate") reads), base64. Level 6: within a percent of level 9's
    size, several times faster."""
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def walk_document(walk) -> tuple[dict, bytes]:
    """What the page's walk-through draws, apart from its header: every stage at every layer and head (numbers
    pooled), the step's logits, the overview's blocks, and the glossary text of every term a stage uses; and the
    pool's binary block."""
    pool = Pool()
    stages = [stage_payload(number, stage, variants, pool)
              for number, (stage, variants) in enumerate(zip(walk.stages, walk.variants), start=1)]
    terms = sorted({term for s in stages for term in s["terms"]} | set(CONTROL_TERMS))
    document = {"stages": stages, "pool": pool.arrays, "blocks": overview(walk, stages),
                "logits": compact_logits(walk.logits, pool), "top_ids": walk.top_ids, "top_pieces": walk.top_pieces,
                "glossary": {term: definition(term) for term in terms if definition(term)}}
    return document, bytes(pool.data)


def walk_payload(walk) -> dict:
    """The walk's header in the clear (what the page's text and a saved file name), and the rest (walk_document)
    deflated: "document", its JSON, and "data", the pool's block. static/walk_data.js's unpackPayload reads it."""
    document, data = walk_document(walk)
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
    return walk_header(walk) | {"document": deflated(text), "data": deflated(data)}
