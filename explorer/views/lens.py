"""Logit lens: which decoder layer first "knew" each word. Every layer's output is read through the
model's final norm and output projection; the grid shows how sure each layer already is of the token
finally chosen, and what it would have chosen itself."""
from __future__ import annotations

import gradio as gr

from transformer.analysis.registered import LENS

from ..figures.lens import lens_grid
from ..text import page_error
from .base import TRANSLATE_FIRST, TRANSLATION, View, current_translation, translated


class LensView(View):
    name, title = "lens", "Logit lens"
    reads = ("sentence",)
    analyses = (LENS,)

    def build(self, context):
        gr.Markdown("Each cell: what that decoder layer would predict at that step if it were the last one. Colour is "
                    "the probability it gives the token the model finally chose; the text is its own top choice. The "
                    "top row is the model's real output distribution.")
        return {"lens_plot": gr.Plot(label="Logit lens", elem_id="lens-plot")}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed not in (TRANSLATION, "sentence") or translation.logit_lens is None:
            return {}
        return {"lens_plot": lens_figure(translation)}

    def at_step(self, ui, result, state, step):
        translation = translated(result, state)
        if translation.logit_lens is None:
            raise page_error(TRANSLATE_FIRST)
        return {"lens_plot": lens_figure(translation, step)}


def lens_figure(translation, marked_step: int | None = None):
    lens = translation.logit_lens
    title = "Logit lens: each decoder layer's prediction at each step" + (
        f" (step {marked_step} marked)" if marked_step else "")
    return lens_grid(lens.chosen_prob, lens.topk, translation.tgt_tokens, title, marked_step)
