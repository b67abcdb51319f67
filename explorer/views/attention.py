"""Attention heatmaps: encoder self-attention, masked decoder self-attention or cross-attention, for one
head, the mean over heads, all heads of a layer tiled, or every layer x head at once. Rows are queries,
columns keys, labelled by the trace itself."""
from __future__ import annotations

import gradio as gr

from transformer.core.head_ref import head_label, layer_label, shown
from transformer.core.probes import ATTENTION_KINDS, PROBES
from transformer.decoding.words import merge_to_words

from .. import figures
from ..components import Radio
from .base import MODEL, View, current_translation
from .selection import ALL, MEAN, OVERVIEW, fit, head_name, select_heads

# an overview of more tiles than this (NLLB-600M: 12 layers x 16 heads, 192) shows one tile per layer, of the chosen
# head or the mean over heads, unless "All heads (tiled)" is chosen: 192 maps of a few pixels each say nothing
MAX_OVERVIEW_TILES = 64


class AttentionView(View):
    name, title = "attention", "Attention"
    controls = ("kind", "merge")
    reads = ("sentence", "layer", "head")

    def build(self, context):
        with gr.Row():
            kind = Radio([(PROBES[k].title.split(" (")[0], k) for k in ATTENTION_KINDS], value="cross",
                         label="Attention", elem_id="kind")
            merge = gr.Checkbox(False, label="Merge subword pieces into words", elem_id="merge")
        return {"kind": kind, "merge": merge,
                "attention_plot": gr.Plot(label="Attention heatmap", elem_id="attention-plot")}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL:
            return {}
        return {"attention_plot": attention_figure(translation.recorded[state["kind"]], state["layer"], state["head"],
                                                   bool(state.get("merge")))}


def _maybe_merge(weights, rows, cols, merge: bool):
    return merge_to_words(weights, rows, cols) if merge else (weights, rows, cols)


def attention_figure(recorded, layer: str, head: str, merge: bool):
    weights, rows, cols = recorded.values, recorded.rows, recorded.cols  # (L, H, rows, cols)
    n_layers, n_heads = weights.shape[:2]
    layer, head = fit(layer, head, n_layers, n_heads)  # the page's choice may be the other stack's
    unit = " (words)" if merge else ""
    if layer == OVERVIEW and n_layers * n_heads > MAX_OVERVIEW_TILES and head != ALL:
        return grouped_overview(recorded, head, merge)
    if layer == OVERVIEW:
        tiles, titles = [], []
        for layer_index in range(n_layers):
            for h in range(n_heads):
                tile, r, c = _maybe_merge(weights[layer_index, h], rows, cols, merge)
                tiles.append(tile)
                titles.append(f"L{shown(layer_index)} H{shown(h)}")
        return figures.tiled_heatmap(
            tiles,
            titles,
            n_heads,
            r,
            c,
            f"{recorded.title}{unit}: every layer (rows) × head (columns)",
            show_token_ticks=False,
            row_group_titles=[f"L{shown(i)}" for i in range(n_layers)],
            col_group_titles=[f"H{shown(h)}" for h in range(n_heads)],
        )
    layer_index = int(layer)
    if head == ALL:
        merged = [_maybe_merge(weights[layer_index, h], rows, cols, merge) for h in range(n_heads)]
        return figures.tiled_heatmap([m[0] for m in merged], [head_label(h) for h in range(n_heads)], min(n_heads, 4),
                                     merged[0][1], merged[0][2],
                                     f"{recorded.title}{unit}: {layer_label(layer_index)}, all {n_heads} heads")
    matrix, r, c = _maybe_merge(select_heads(weights, layer_index, head), rows, cols, merge)
    return figures.attention_heatmap(matrix, r, c, f"{recorded.title}{unit}: {layer_label(layer_index)}, "
                                     f"{head_name(head, n_heads)}", recorded.row_title, recorded.col_title)


def grouped_overview(recorded, head: str, merge: bool):
    """Every layer, one tile each: the chosen head's map or the mean over heads (a large model's overview)."""
    weights, rows, cols = recorded.values, recorded.rows, recorded.cols
    n_layers, n_heads = weights.shape[:2]
    head = head if head not in (ALL, MEAN) and int(head) < n_heads else MEAN
    tiles = []
    for layer_index in range(n_layers):
        tile, r, c = _maybe_merge(select_heads(weights, layer_index, head), rows, cols, merge)
        tiles.append(tile)
    unit = " (words)" if merge else ""
    return figures.tiled_heatmap(
        tiles, [f"L{shown(i)}" for i in range(n_layers)], min(n_layers, 6), r, c,
        f"{recorded.title}{unit}: every layer, {head_name(head, n_heads)} ({n_layers} × {n_heads} heads: choose "
        "All heads (tiled) for every one)", show_token_ticks=False)
