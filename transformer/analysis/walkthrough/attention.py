"""One attention sub-layer at the chosen layer and head, operation by operation: query, key and value; the scores
(with the causal mask in the decoder's self-attention, the padding mask elsewhere); the softmax; the weighted sum;
the heads concatenated; W_O. Shapes as recorded: (L, H, Tq, Tk) for scores and weights, (L, H, T, hs) for queries,
keys and values, (L, T, D) for the concatenation."""
from __future__ import annotations

import numpy as np

from ...core.head_ref import head_label, shown
from .context import WalkContext, masked_as_inf, norm_of, side_of, vector
from .stage import Numbers
from .text import KEYS_FROM, KIND_NAMES, KIND_TERMS, phrase


def numbered(labels: list[str]) -> list[str]:
    """Row labels that also carry the position, counted from 1: "3: ▁cat"."""
    return [f"{shown(i)}: {label}" for i, label in enumerate(labels)]


def attention_stages(walk: WalkContext, kind: str, block: str, group: str, position: int, keys_shown: int) -> None:
    side = side_of(kind)
    rec, layer, h, d_k = walk.rec, walk.layer_of(side), walk.head_of(side), walk.head_size(side)
    d_model = walk.config.d_model
    rows = walk.src if kind == "encoder_self" else walk.inputs
    cols = (walk.src if kind in ("encoder_self", "cross") else walk.inputs)[:keys_shown]
    q = rec[f"{kind}.queries"][layer, h, position]
    k = rec[f"{kind}.keys"][layer, h, :keys_shown]
    v = rec[f"{kind}.values"][layer, h, :keys_shown]
    weights = rec[kind][layer, h]
    query = rows[position]
    if kind == "cross":  # the key and value shown beside the query: the source piece this head weighs most
        j = int(weights[position].argmax())
        shown_why = phrase("shown.cross", piece=cols[j], number=shown(j), query=query,
                           weight=f"{float(weights[position, j]):.3g}")
    else:
        j = position
        shown_why = phrase("shown.self", query=query, number=shown(j))
    where = walk.where(side)
    facts = {"where": where, "head": head_label(h), "kind": KIND_NAMES[kind].lower(), "query": query,
             "keys_from": KEYS_FROM[kind], "position": shown(position), "keys": keys_shown,
             "keys_name": "source piece", "shown_why": shown_why}
    walk.add(f"{block}.{kind}.qkv", block, group, "qkv", "projections",
             [vector("query", f"q of “{query}”", q), vector("key", f"k of “{cols[j]}”", k[j]),
              vector("value", f"v of “{cols[j]}”", v[j]),
              Numbers("projection_shape", "each projection per head", "tokens", [d_model, d_k],
                      cols=["d_model", "d_k"])],
             ("query", "key", "value", "head", KIND_TERMS[kind]), **facts)
    if kind == "decoder_self":
        causal_stages(walk, kind, block, group, position, keys_shown, cols, facts)
    else:
        padded_stages(walk, kind, block, group, position, keys_shown, cols, k, facts)
    head_out = rec[f"{kind}.heads"][layer, h, position]
    walk.add(f"{block}.{kind}.weighted_sum", block, group, "weighted_sum", "attention",
             [Numbers("values", "values v_j", "matrix", v.numpy(), rows=numbered(cols), axes=("key", "feature")),
              Numbers("weights", "α_j", "row", weights[position, :keys_shown].numpy(), cols=cols, axes=("", "key")),
              vector("head_output", "this head's output", head_out)], ("value", "head"), **facts)
    concat = rec[f"{kind}.concat"][layer, position]
    walk.add(f"{block}.{kind}.concat", block, group, "concat", "heads",
             [vector("concat", "concat", concat), Numbers("heads", "heads", "scalar", d_model // d_k)],
             ("head",), where=facts["where"])


def causal_stages(walk, kind, block, group, position, keys_shown, cols, facts) -> None:
    """The decoder's self-attention: every step's row, the upper triangle masked (the mask is the point)."""
    side = side_of(kind)
    rec, layer, h, d_k = walk.rec, walk.layer_of(side), walk.head_of(side), walk.head_size(side)
    scores, masked, weights = (rec[name][layer, h] for name in (f"{kind}.scores", f"{kind}.masked_scores", kind))
    every = numbered(walk.inputs)
    walk.add(f"{block}.{kind}.scores", block, group, "scores.causal", "attention",
             [Numbers("scores", "s_j = q·k_j/√d_k (this step)", "row", scores[position, :keys_shown].numpy(),
                      cols=cols, axes=("", "key")),
              Numbers("masked_scores", "every step's scores after the causal mask", "matrix", masked_as_inf(masked),
                      rows=every, cols=walk.inputs, axes=("query", "key")),
              Numbers("d_k", "d_k", "scalar", d_k)], ("causal mask", "score", "masked self-attention"), **facts)
    walk.add(f"{block}.{kind}.softmax", block, group, "softmax.causal", "attention",
             [Numbers("weights", "α_j (this step)", "row", weights[position, :keys_shown].numpy(), cols=cols,
                      axes=("", "key")),
              Numbers("all_weights", "every step's weights", "matrix", weights.numpy(), rows=every, cols=walk.inputs,
                      axes=("query", "key"))], ("softmax", "attention weight"), **facts)


def padded_stages(walk, kind, block, group, position, keys_shown, cols, k, facts) -> None:
    """Encoder self-attention and cross-attention: one query's scores, the padding mask, the softmax."""
    side = side_of(kind)
    rec, layer, h, d_k = walk.rec, walk.layer_of(side), walk.head_of(side), walk.head_size(side)
    scores, masked, weights = (rec[name][layer, h] for name in (f"{kind}.scores", f"{kind}.masked_scores", kind))
    row_masked = masked_as_inf(masked[position, :keys_shown])
    mask_row = np.where(row_masked == -np.inf, -np.inf, 0.0)
    walk.add(f"{block}.{kind}.scores", block, group, "scores", "attention",
             [Numbers("scores", "s_j", "row", scores[position, :keys_shown].numpy(), cols=cols, axes=("", "key")),
              Numbers("keys", "keys k_j", "matrix", k.numpy(), rows=numbered(cols), axes=("key", "feature")),
              Numbers("d_k", "d_k", "scalar", d_k)], ("score", "key", "query"), **facts)
    walk.add(f"{block}.{kind}.mask", block, group, "mask", "mask",
             [Numbers("mask", "M_j", "row", mask_row, cols=cols, axes=("", "key")),
              Numbers("masked_scores", "s_j after the mask", "row", row_masked, cols=cols, axes=("", "key"))],
             ("padding mask",), **facts)
    walk.add(f"{block}.{kind}.softmax", block, group, "softmax", "attention",
             [Numbers("weights", "α_j", "row", weights[position, :keys_shown].numpy(), cols=cols, axes=("", "key"))],
             ("softmax", "attention weight"), **facts)


def output_projection(walk: WalkContext, kind: str, block: str, group: str, position: int) -> None:
    side = side_of(kind)
    out = walk.rec[f"{kind}_residual.sublayer"][walk.layer_of(side), position]
    walk.add(f"{block}.{kind}.output", block, group, "output_projection", "heads",
             [vector("output", "concat W_O + b_O", out), Numbers("norm", "‖out‖", "scalar", norm_of(out))],
             ("W_O",), where=walk.where(side))
