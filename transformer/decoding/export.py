"""A translation's trace as JSON and as CSV (long format, one weight per row): the numbers behind every plot.

Layers, heads, steps and positions are numbered from 1, as the app numbers them ("step", "layer", "head",
"query", "key" columns and fields); arrays keep their natural order, index 0 being number 1. `run` (model,
direction, weights hash, settings, app version) makes an export enough to reproduce the run. The bertviz
export holds what `bertviz.head_view` / `model_view` take for an encoder-decoder model.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from ..core.head_ref import shown
from ..core.probes import ATTENTION_KINDS
from .trace import Translation


def translation_dict(translation: Translation) -> dict:
    out = {
        "source": translation.source,
        "text": translation.text,
        "truncated": translation.truncated,
        "score": translation.score,
        "strategy": translation.strategy,
        "settings": translation.settings,
        "src_tokens": translation.src_tokens,
        "src_ids": translation.src_ids,
        "tgt_tokens": translation.tgt_tokens,
        "tgt_ids": translation.tgt_ids,
        "decoder_input_tokens": translation.decoder_input_tokens,
        "steps": [{"step": number, **asdict(step)} for number, step in enumerate(translation.steps, start=1)],
        "tree": None
        if translation.tree is None
        else {
            "winner": translation.tree.winner,
            "nodes": [{"step": shown(n.depth), **asdict(n)} for n in translation.tree.nodes],
        },
        "attention": None,
    }
    alti = translation.contributions
    out["contributions"] = None if alti is None else {  # ALTI+ (analysis/alti.py), filled on request
        "method": "ALTI+ (Ferrando et al., 2022): each prediction's contributions from each source piece, then each "
                  "decoder input; rows sum to 1",
        "rows": translation.tgt_tokens, "cols": translation.src_tokens + translation.decoder_input_tokens,
        "matrix": alti.matrix.round(6).tolist(), "source_share": alti.source_share.round(6).tolist()}
    lens = translation.logit_lens
    out["logit_lens"] = None if lens is None else {
        "axes": ["layer", "step"], "topk": lens.topk, "chosen_prob": lens.chosen_prob.round(6).tolist(),
        "chosen_rank": lens.chosen_rank.tolist()}
    for name, recorded in translation.recorded.items():
        if name not in ATTENTION_KINDS:
            continue  # layer outputs (d_model wide) stay in the Python API: they would dwarf the rest
        entry = {"title": recorded.title, "shape": list(recorded.values.shape), "axes": list(recorded.axes),
                 "rows": recorded.rows, "cols": recorded.cols, "weights": recorded.values.round(6).tolist()}
        if translation.norms is not None:  # norm-based attention (Kobayashi et al., 2020), analysis/norms.py
            entry["norms"] = translation.norms[name].round(6).tolist()  # (layer, head, key): ‖f(x_key)‖
            entry["weighted_norms"] = translation.weighted_norms(name).round(6).tolist()  # like weights
        out["attention"] = out["attention"] or {}
        out["attention"][name] = entry
    return out


def to_json(translations: list[Translation], run: dict | None = None) -> str:
    """`run`: what produced the translations (model, direction, weights hash, settings, app version)."""
    document = {"run": run, "numbering": "layers, heads, steps and positions count from 1"} if run else {}
    return json.dumps({**document, "sentences": [translation_dict(t) for t in translations]}, ensure_ascii=False,
                      indent=1)


def steps_csv(translations: list[Translation]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["sentence", "step", "token", "token_id", "prob", "rank", "candidate", "candidate_prob"])
    for sentence, translation in enumerate(translations, start=1):
        for step_number, step in enumerate(translation.steps, start=1):
            for rank, (candidate, prob) in enumerate(step.topk, start=1):
                writer.writerow([sentence, step_number, step.token, step.token_id, f"{step.prob:.6f}", rank, candidate,
                                 f"{prob:.6f}"])
    return buffer.getvalue()


def attention_csv(translations: list[Translation]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["sentence", "kind", "layer", "head", "query", "query_token", "key", "key_token", "weight",
                     "weighted_norm"])  # ‖α f(x)‖ (Kobayashi et al., 2020), empty when the norms were not computed
    for sentence, translation in enumerate(translations, start=1):
        for kind in ATTENTION_KINDS:
            if kind not in translation.recorded:
                continue
            recorded = translation.recorded[kind]
            weights, norms = recorded.values, translation.weighted_norms(kind)
            for layer in range(weights.shape[0]):
                for head in range(weights.shape[1]):
                    for q, query in enumerate(recorded.rows):
                        for k, key in enumerate(recorded.cols):
                            norm = "" if norms is None else f"{norms[layer, head, q, k]:.6f}"
                            writer.writerow([sentence, kind, shown(layer), shown(head), shown(q), query, shown(k), key,
                                             f"{weights[layer, head, q, k]:.6f}", norm])
    return buffer.getvalue()


def bertviz_dict(translation: Translation) -> dict:
    """The layout bertviz's head_view / model_view take for an encoder-decoder model: per layer, a
    (batch 1, heads, queries, keys) array; the decoder's tokens are what it reads, <s> then the output."""
    def per_layer(kind):
        return [layer[None].round(6).tolist() for layer in translation.recorded[kind].values]

    return {"encoder_tokens": translation.src_tokens, "decoder_tokens": translation.decoder_input_tokens,
            "encoder_attention": per_layer("encoder_self"), "decoder_attention": per_layer("decoder_self"),
            "cross_attention": per_layer("cross")}
