"""Positional encoding: the model's table, chosen dimensions over positions, the dot product between
positions, and for the current input the size of the positional part next to the scaled token embedding."""
from __future__ import annotations

import gradio as gr

from transformer.numbers import ascii_digits

from .. import figures
from .base import MODEL, TRANSLATION, View, current_translation, plot_row


def default_dimensions(d_model: int) -> list[int]:
    return [0, 1, d_model // 8, d_model // 4, d_model // 2]


def chosen_dimensions(dimensions, d_model: int) -> list[int]:
    chosen = [int(d) for d in (dimensions or []) if ascii_digits(str(d)) and int(d) < d_model]
    return chosen or default_dimensions(d_model)


class PositionalView(View):
    name, title = "positional", "Positional encoding"
    controls = ("dimensions",)
    reads = ("sentence",)

    def build(self, context):
        d_model = context.profile.config.d_model
        dimensions = gr.Dropdown([str(d) for d in range(d_model)], multiselect=True,
                                 value=[str(d) for d in default_dimensions(d_model)], label="Dimensions to plot",
                                 elem_id="dimensions")
        tables = plot_row(encoding_plot=("Encoding table", "encoding-plot"),
                          similarity_plot=("Position similarity", "similarity-plot"))
        curves = gr.Plot(label="Dimensions over positions", elem_id="curves-plot")
        norms = gr.Plot(label="Token vs positional part for this input", elem_id="norms-plot")
        return {"dimensions": dimensions, **tables, "curves_plot": curves, "norms_plot": norms}

    def render(self, result, state, context, changed):
        profile = context.profile
        out = {}
        if profile.relative_bias is not None:  # T5: no table of positions, a bias on the scores instead
            out |= self.relative(profile.relative_bias) if changed in (MODEL, "dimensions") else {}
        elif changed in (MODEL, "dimensions"):
            table = profile.positional_table
            out["curves_plot"] = figures.encoding_curves(
                table, chosen_dimensions(state.get("dimensions"), table.shape[1]), "Chosen dimensions over positions"
            )
        if changed == MODEL and profile.relative_bias is None:
            kind = profile.config.pos_encoding.capitalize()
            out["encoding_plot"] = figures.encoding_heatmap(profile.positional_table,
                                                            f"{kind} positional encoding: positions × dimensions")
            out["similarity_plot"] = figures.position_similarity(profile.positional_table[:60],
                                                                 "Dot product between position encodings")
        translation = current_translation(result, state)
        if translation is not None and changed in (TRANSLATION, "sentence"):
            token_norms, position_norms = context.profiles[result.model_key].source_norms(translation.src_ids)
            out["norms_plot"] = figures.positional_vs_token_norms(token_norms, position_norms, translation.src_tokens,
                                                                  "This input: size of the token and positional parts")
        return out

    @staticmethod
    def relative(bias: dict) -> dict:
        """T5's positions: each stack's learned bias per head and distance, added to its self-attention scores;
        the model adds no positional vector (the token-vs-position sizes below show zeros)."""
        distances = bias["distances"]
        return {
            "encoding_plot": figures.relative_bias_heatmap(
                bias["encoder"], distances, "No positional vectors: the encoder's relative position bias, heads × "
                                            "distance"),
            "similarity_plot": figures.relative_bias_heatmap(
                bias["decoder"], distances, "The decoder's relative position bias (it sees only the past)"),
            "curves_plot": figures.relative_bias_curves(
                bias["encoder"], distances, "Encoder heads: the bias added to a score, by distance"),
        }
