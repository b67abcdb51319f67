"""A translation's tokens, steps and attention as JSON and as CSV (long format, one weight per row)."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from .translator import Translation
from .views import axis_labels


def translation_dict(translation: Translation) -> dict:
    out = {
        "source": translation.source, "text": translation.text, "truncated": translation.truncated, "score": translation.score,
        "src_tokens": translation.src_tokens, "src_ids": translation.src_ids,
        "tgt_tokens": translation.tgt_tokens, "tgt_ids": translation.tgt_ids,
        "decoder_input_tokens": translation.decoder_input_tokens,
        "steps": [asdict(step) for step in translation.steps],
        "attention": None,
    }
    if translation.attention is not None:
        out["attention"] = {
            kind: {"shape": list(getattr(translation.attention, kind).shape), "axes": ["layer", "head", "query", "key"],
                   "weights": getattr(translation.attention, kind).round(6).tolist()}
            for kind in ("encoder_self", "decoder_self", "cross")
        }
    return out


def to_json(translations: list[Translation]) -> str:
    return json.dumps({"sentences": [translation_dict(t) for t in translations]}, ensure_ascii=False, indent=1)


def steps_csv(translations: list[Translation]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["sentence", "step", "token", "token_id", "prob", "rank", "candidate", "candidate_prob"])
    for sentence, translation in enumerate(translations):
        for step_index, step in enumerate(translation.steps):
            for rank, (candidate, prob) in enumerate(step.topk, start=1):
                writer.writerow([sentence, step_index, step.token, step.token_id, f"{step.prob:.6f}", rank, candidate,
                                 f"{prob:.6f}"])
    return buffer.getvalue()


def attention_csv(translations: list[Translation]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["sentence", "kind", "layer", "head", "query_index", "query_token", "key_index", "key_token", "weight"])
    for sentence, translation in enumerate(translations):
        if translation.attention is None:
            continue
        for kind in ("encoder_self", "decoder_self", "cross"):
            weights = getattr(translation.attention, kind)
            rows, cols = axis_labels(translation.src_tokens, translation.tgt_tokens, kind)
            for layer in range(weights.shape[0]):
                for head in range(weights.shape[1]):
                    for q, query in enumerate(rows):
                        for k, key in enumerate(cols):
                            writer.writerow([sentence, kind, layer, head, q, query, k, key, f"{weights[layer, head, q, k]:.6f}"])
    return buffer.getvalue()
