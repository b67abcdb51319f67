"""Attribution: which source pieces fed each target piece, three ways side by side, computed on demand for
the current sentence (not during every translation): raw cross-attention (mean over layers and heads),
attention rollout through the encoder and cross-attention (Abnar & Zuidema 2020; each layer's attention
mixed half and half with the residual identity), and input x gradient of the chosen token's log-probability
with respect to the source embeddings."""
from __future__ import annotations

import gradio as gr
import numpy as np

from transformer.analysis.rollout import RESIDUAL_WEIGHT, rollout

from .. import figures
from .base import TRANSLATION, View, plot_row, translated

PROMPT = "Press the button to compute the three readings for the current sentence."


class AttributionView(View):
    name, title = "attribution", "Attribution"
    reads = ("sentence",)

    def build(self, context):
        gr.Markdown(f"Rows are target pieces, columns source pieces. Rollout gives the residual path a weight of "
                    f"{RESIDUAL_WEIGHT} in every encoder layer and averages cross-attention over layers; input × "
                    "gradient is signed (red: the source piece raised the chosen token's log-probability).")
        button = gr.Button("Compute attribution for this sentence", elem_id="attribution-button")
        note = gr.Markdown(PROMPT, elem_id="attribution-text")
        plots = plot_row(
            attribution_attention=("Cross-attention (mean over layers and heads)", "attribution-attention"),
            attribution_rollout=("Attention rollout", "attribution-rollout"),
            attribution_gradient=("Input × gradient", "attribution-gradient"),
        )
        return {"attribution_button": button, "attribution_text": note, **plots}

    def render(self, result, state, context, changed):
        if changed in (TRANSLATION, "sentence"):  # the readings belong to one sentence: cleared for another
            return {"attribution_text": PROMPT, "attribution_attention": None, "attribution_rollout": None,
                    "attribution_gradient": None}
        return {}

    def wire(self, ui):
        c = ui.components

        def compute(result, sentence):
            translation = translated(result, {"sentence": sentence})
            rows, cols = translation.tgt_tokens, translation.src_tokens
            raw = translation.recorded["cross"].values.mean(axis=(0, 1))
            rolled = rollout(translation).source
            gradient = ui.service.attribute(result, translation).scores
            scale = float(np.abs(gradient).max()) or 1.0
            return {
                c["attribution_text"]: f"Computed for: {len(rows)} target and {len(cols)} source pieces.",
                c["attribution_attention"]: figures.attention_heatmap(raw, rows, cols, "Cross-attention",
                                                                      "target piece", "source piece"),
                c["attribution_rollout"]: figures.attention_heatmap(rolled, rows, cols, "Rollout", "target piece",
                                                                    "source piece"),
                c["attribution_gradient"]: figures.attention_heatmap(gradient / scale, rows, cols,
                                                                     "Input × gradient (scaled to ±1)",
                                                                     "target piece", "source piece"),
            }

        c["attribution_button"].click(compute, [ui.result_state, c["sentence"]],
                                      [c[name] for name in ("attribution_text", "attribution_attention",
                                                            "attribution_rollout", "attribution_gradient")],
                                      api_visibility="private")
