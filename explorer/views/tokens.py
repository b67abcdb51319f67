"""Tokens: the sentencepiece pieces and ids of the source and of the translation, side by side."""
from __future__ import annotations

import gradio as gr
import pandas as pd

from .base import MODEL, View, current_translation


class TokensView(View):
    name, title = "tokens", "Tokens"
    reads = ("sentence",)

    def build(self, context):
        with gr.Row():
            source = gr.Dataframe(label="Source pieces", elem_id="source-tokens", interactive=False)
            target = gr.Dataframe(label="Translation pieces", elem_id="target-tokens", interactive=False)
        return {"source_tokens": source, "target_tokens": target}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL:
            return {}
        return {"source_tokens": pieces_table(translation.src_tokens, translation.src_ids),
                "target_tokens": pieces_table(translation.tgt_tokens, translation.tgt_ids)}


def pieces_table(pieces: list[str], ids: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        [(i + 1, p, t) for i, (p, t) in enumerate(zip(pieces, ids))], columns=["position", "piece", "id"]
    )
