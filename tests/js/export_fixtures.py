"""Writes the fixture tests/js/live_data.test.js checks the browser's data work against: a real translation's live
payload and, for several views of it, the matrix and labels computed here with numpy and
transformer/decoding/words.py, independently of the JavaScript.

    python tests/js/export_fixtures.py OUT.json
"""
from __future__ import annotations

import base64
import json
import sys
import zlib
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from explorer.live_payload import live_payload  # noqa: E402
from transformer import Translator  # noqa: E402
from transformer.analysis.alti import add_contributions  # noqa: E402
from transformer.analysis.norms import add_norms  # noqa: E402
from transformer.decoding.words import merge_to_words  # noqa: E402

# long, rare words: several pieces each, so merging and a step inside a word are exercised
SENTENCE = "The unbelievably enthusiastic skateboarders jumped over seventeen barrels."
CASES = [("encoder_self", 0, 1, None, False), ("encoder_self", 2, "mean", None, True),
         ("decoder_self", 1, "mean", 4, True), ("decoder_self", 0, 3, 3, False), ("cross", 2, "mean", None, True),
         ("cross", 1, 2, 5, True), ("cross", 0, "mean", 2, False), ("cross", 2, "mean", 8, True),
         ("decoder_self", 2, 1, 17, True)]
# the same views in norm-based attention (the weights times the payload's norms, each row scaled to sum to 1)
ALTI_CASES = [("alti", 2, "mean", None, False), ("alti", 1, 0, 4, True), ("alti", 0, "mean", 6, False)]
NORM_CASES = [("encoder_self", 1, 2, None, False), ("cross", 2, "mean", None, True), ("decoder_self", 1, 0, 5, True),
              ("cross", 0, 3, 4, False)]


def expected(translation, payload, kind: str, layer: int, head, step, merge: bool, measure="weights") -> dict:
    if kind == "alti":  # ALTI+ contributions after each decoder layer, as one "head"; columns: source, then prefix
        raw, rows, cols = (translation.contributions.layers[:, None], list(translation.tgt_tokens),
                           translation.src_tokens + translation.decoder_input_tokens)
    else:
        recorded = translation.recorded[kind]
        raw, rows, cols = recorded.values, list(recorded.rows), list(recorded.cols)
    values = np.clip(np.rint(raw * 255), 0, 255) / 255  # what the bytes hold
    if measure == "norms":
        layers, heads, _, keys = values.shape
        # what the browser reads: the norms as bytes relative to each head's largest
        packed = np.frombuffer(zlib.decompress(base64.b64decode(payload["kinds"][kind]["norms"])), dtype=np.uint8)
        norms = packed.reshape(layers, heads, 1, keys) / 255
        values = values * norms
        values = values / np.maximum(values.sum(axis=-1, keepdims=True), 1e-30)
    matrix = values[layer].mean(axis=0) if head == "mean" else values[layer, head]
    if step and kind != "encoder_self":
        matrix, rows = matrix[:step], rows[:step]
        if kind in ("decoder_self", "alti"):  # the decoder inputs so far (after the source, for ALTI+)
            keep = step + (len(translation.src_tokens) if kind == "alti" else 0)
            matrix, cols = matrix[:, :keep], cols[:keep]
    if merge:
        matrix, rows, cols = merge_to_words(matrix, rows, cols)
    return {"kind": kind, "layer": layer, "head": head, "step": step, "merge": merge, "measure": measure,
            "m": matrix.tolist(), "rows": rows, "cols": cols}


def full_precision_norms(translation, kind: str) -> list:
    """‖α_ij f(x_j)‖ of every layer and head in float64, each row scaled to sum to 1, flattened row-major."""
    recorded = translation.recorded[kind]
    values = recorded.values.astype(np.float64) * translation.norms[kind].astype(np.float64)[:, :, None, :]
    return (values / values.sum(axis=-1, keepdims=True)).ravel().tolist()


def main(out: str) -> None:
    translator = Translator.from_pretrained(ROOT / "checkpoints" / "en-de")
    translation = add_norms(translator.model, translator.translate(SENTENCE, capture=True))
    add_contributions(translator.model, translation)
    payload = live_payload(translation)
    fixture = {"sentence": SENTENCE, "payload": payload,
               "cases": [expected(translation, payload, *case) for case in CASES]
               + [expected(translation, payload, *case, measure="norms") for case in NORM_CASES]
               + [expected(translation, payload, *case) for case in ALTI_CASES],
               # norm-based attention at full precision, before any quantising: the bytes must stay close to it
               "full_precision_norms": {kind: full_precision_norms(translation, kind)
                                        for kind in ("encoder_self", "decoder_self", "cross")}}
    fixture["walk"] = walk_fixture(translator, translation)
    Path(out).write_text(json.dumps(fixture, ensure_ascii=False), encoding="utf-8")


def walk_fixture(translator, translation) -> dict:
    """The walk-through's payload (every array pooled in float16 or int8) and, for tests/js/walk_data.test.js, what
    the API sends at full precision for several layers and heads (walk_json, before any pooling), each stage's block,
    and the softmax of the step's logits over the whole vocabulary at a few temperatures, computed here with numpy."""
    from explorer.views.walkthrough_payload import walk_json, walk_payload
    from transformer.analysis.walkthrough import walkthrough
    from transformer.decoding.strategies.sampling import SamplingSettings, filtered_distribution

    walk = walkthrough(translator.model, translator.tokenizer, translation, token=3, step=4, head=1)
    config = translator.model.config
    sent = walk_json(walk)
    views = []
    for layer, head in ((0, 0), (config.n_layers - 1, config.n_heads - 1), (1, 2)):
        stages = []
        for stage in sent["stages"]:
            version = stage
            if stage["per"]:
                index = layer if stage["per"] == "layer" else layer * config.n_heads + head
                version = stage["variants"][index]
            stages.append({"title": version["title"], "values": [n["values"] for n in version["numbers"]]})
        views.append({"layer": layer, "head": head, "stages": stages})
    logits = torch.as_tensor(walk.logits, dtype=torch.float64)[None]
    sampled = []
    for temperature, top_k, top_p in ((1.0, 0, 1.0), (0.5, 0, 1.0), (2.0, 5, 1.0), (1.3, 0, 0.6), (0.8, 40, 0.9)):
        settings = SamplingSettings(temperature=temperature, top_k=top_k, top_p=top_p)
        probs = filtered_distribution(logits, settings)[0]
        plain = torch.softmax(logits[0] / temperature, dim=-1)
        sampled.append({"temperature": temperature, "top_k": top_k, "top_p": top_p,
                        "ids": walk.top_ids[:20], "probs": [float(probs[i]) for i in walk.top_ids[:20]],
                        "plain": [float(plain[i]) for i in walk.top_ids[:20]], "kept": int((probs > 0).sum())})
    return {"payload": walk_payload(walk), "views": views, "blocks": [s["block"] for s in sent["stages"]],
            "keys": [s["key"] for s in sent["stages"]], "sampled": sampled}


if __name__ == "__main__":
    main(sys.argv[1])
