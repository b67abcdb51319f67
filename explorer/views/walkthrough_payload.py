"""The walk-through as JSON: every stage's named, labelled numbers, numbered from 1 (stages, the token, the step and the
head) like the rest of the API. The API sends them at 6 decimals (`walk_json`); the page gets them at 4 significant
digits with the overview's blocks and the glossary entries of the terms its stages use (`walk_payload`), everything
the browser draws, so that moving between stages never asks the server (static/walk_data.js, walk_render.js)."""
from __future__ import annotations

import math

import numpy as np

from ..glossary import definition

# the overview diagram, in the order the data flows; each stage names its block
BLOCKS = (("text", "Pieces", "the sentence cut into pieces and ids"),
          ("input", "Into the model", "embedding × √d_model + positional encoding"),
          ("encoder", "Encoder layers", "self-attention and feed-forward, every source piece at once"),
          ("cross", "Cross-attention", "the decoder reads the encoder's output"),
          ("decoder", "Decoder layers", "masked self-attention and feed-forward, one step at a time"),
          ("output", "Next-piece probabilities", "final norm, output projection, softmax, the choice"))

# the keys and values of every position (positions x d_k) and every step's attention are drawn as colours, with the
# value on hover: whole numbers in [-99, 99] times one scale per matrix are enough there, and they are most of the
# payload
LARGE_MATRIX = 256
LEVELS = 99


def quantised(rows: list[list]) -> dict:
    """A large matrix as {"scale": s, "q": whole numbers}: value ≈ q × s, to within s / 2 (s = largest |value| / 99);
    "-inf" (a masked score) stays as it is. walk_data.js's resolveRefs turns it back into numbers."""
    finite = [abs(v) for row in rows for v in row if isinstance(v, float)]
    scale = max(finite, default=0.0) / LEVELS or 1.0
    return {"scale": float(f"{scale:.6g}"),
            "q": [[round(v / scale) if isinstance(v, float) else v for v in row] for row in rows]}


def rounded(value, digits: int | None, significant: int | None):
    """A float for JSON: -inf/inf/nan as text ("-inf"), else rounded (decimals `digits`, or `significant` digits)."""
    value = float(value)
    if not math.isfinite(value):
        return "-inf" if value < 0 else ("inf" if value > 0 else "nan")
    if significant is not None:
        return float(f"{value:.{significant}g}")
    return round(value, digits)


def plain(values, digits: int | None = 6, significant: int | None = None):
    if isinstance(values, np.ndarray):
        if values.ndim == 0:
            return rounded(values, digits, significant)
        return [plain(v, digits, significant) for v in values]
    if isinstance(values, (list, tuple)):
        return [plain(v, digits, significant) for v in values]
    if isinstance(values, (bool, np.bool_)):
        return bool(values)
    if isinstance(values, (int, np.integer)):
        return int(values)
    if isinstance(values, (float, np.floating)):
        return rounded(values, digits, significant)
    return values


def walk_json(walk, digits: int | None = 6, significant: int | None = None) -> dict:
    """A Walkthrough (transformer/analysis/walkthrough.py) as JSON, numbered from 1."""
    stages = []
    for number, stage in enumerate(walk.stages, start=1):
        stages.append({"number": number, "key": stage.key, "block": stage.block, "title": stage.title,
                       "text": stage.text, "formula": stage.formula, "module": stage.module, "terms": list(stage.terms),
                       "numbers": [{"name": n.name, "label": n.label, "kind": n.kind,
                                    "values": plain(n.values, digits, significant), "rows": n.rows, "cols": n.cols,
                                    **({"note": n.note} if n.note else {})} for n in stage.numbers]})
    return {"source": walk.source, "translation": walk.text, "token": walk.token + 1, "step": walk.step + 1,
            "head": walk.head + 1, "token_piece": walk.src_tokens[walk.token],
            "step_piece": walk.tgt_tokens[walk.step], "architecture": walk.architecture,
            "src_tokens": walk.src_tokens, "decoder_inputs": walk.decoder_inputs, "tgt_tokens": walk.tgt_tokens,
            "stages": stages}


def walk_payload(walk) -> dict:
    """What the page's walk-through draws: the stages at 3 significant digits, the overview's blocks with the
    numbers of their stages, and the glossary text of every term a stage uses. A vector a stage shows again (the
    residual add's input, the sum the next norm reads) is sent once: later copies are {"ref": [stage, index]}, the
    1-based stage number and 0-based index of the first copy in that stage's numbers (walk_data.js resolves them)."""
    payload = walk_json(walk, digits=None, significant=3)
    first: dict[tuple, list[int]] = {}
    for stage in payload["stages"]:
        for index, numbers in enumerate(stage["numbers"]):
            if numbers["kind"] == "matrix" and sum(len(row) for row in numbers["values"]) > LARGE_MATRIX:
                numbers["values"] = quantised(numbers["values"])
            if numbers["kind"] != "vector":
                continue
            seen = first.setdefault(tuple(numbers["values"]), [stage["number"], index])
            if seen != [stage["number"], index]:
                numbers["values"] = {"ref": seen}
    a = walk.architecture
    layers, pieces, inputs = a["n_layers"], len(walk.src_tokens), walk.step + 1
    flowing = {"text": f"{pieces} pieces", "input": f"{pieces} vectors × {a['d_model']}",
               "encoder": f"{pieces} × {a['d_model']} through {layers} layers",
               "cross": f"reads the {pieces} source vectors", "decoder": f"{inputs} input(s) × {a['d_model']}",
               "output": f"{a['tgt_vocab_size']} probabilities"}
    blocks = []
    for key, title, note in BLOCKS:
        numbers = [s["number"] for s in payload["stages"] if s["block"] == key]
        if numbers:
            if key in ("encoder", "decoder"):
                title = f"{title} × {layers}"
            blocks.append({"key": key, "title": title, "note": note, "data": flowing[key], "stages": numbers})
    terms = sorted({term for s in payload["stages"] for term in s["terms"]})
    payload["blocks"] = blocks
    payload["glossary"] = {term: definition(term) for term in terms if definition(term)}
    return payload
