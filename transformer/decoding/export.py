"""A translation's trace as JSON and as CSV (long format, one weight per row): the numbers behind every plot."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from ..core.probes import ATTENTION_KINDS
from .trace import Translation


def translation_dict(translation: Translation) -> dict:
    out = {
        "source": translation.source, "text": translation.text, "truncated": translation.truncated, "score": translation.score,
        "strategy": translation.strategy, "settings": translation.settings,
        "src_tokens": translation.src_tokens, "src_ids": translation.src_ids,
        "tgt_tokens": translation.tgt_tokens, "tgt_ids": translation.tgt_ids,
        "decoder_input_tokens": translation.decoder_input_tokens,
        "steps": [asdict(step) for step in translation.steps],
        "tree": None if translation.tree is None else {"winner": translation.tree.winner,
                                                        "nodes": [asdict(n) for n in translation.tree.nodes]},
        "attention": None,
    }
    lens = translation.logit_lens
    out["logit_lens"] = None if lens is None else {
        "axes": ["layer", "step"], "topk": lens.topk, "chosen_prob": lens.chosen_prob.round(6).tolist(),
        "chosen_rank": lens.chosen_rank.tolist()}
    for name, recorded in translation.recorded.items():
        if name not in ATTENTION_KINDS:
            continue  # layer outputs (d_model wide) stay in the Python API: they would dwarf the rest
        entry = {"title": recorded.title, "shape": list(recorded.values.shape), "axes": list(recorded.axes),
                 "rows": recorded.rows, "cols": recorded.cols, "weights": recorded.values.round(6).tolist()}
        out["attention"] = out["attention"] or {}
        out["attention"][name] = entry
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
        for kind in ATTENTION_KINDS:
            if kind not in translation.recorded:
                continue
            recorded = translation.recorded[kind]
            weights = recorded.values
            for layer in range(weights.shape[0]):
                for head in range(weights.shape[1]):
                    for q, query in enumerate(recorded.rows):
                        for k, key in enumerate(recorded.cols):
                            writer.writerow([sentence, kind, layer, head, q, query, k, key, f"{weights[layer, head, q, k]:.6f}"])
    return buffer.getvalue()
