"""Step by step: the decoder input so far, the candidates the model weighed, where that step looked in the
source, and (beam search) the live hypotheses. ▶ Play walks through the recorded steps."""
from __future__ import annotations

import time

import gradio as gr
import pandas as pd

from transformer.core.head_ref import from_shown, head_label, layer_label

from .. import figures
from ..components import Slider
from ..request import MAX_OUTPUT_TOKENS
from ..text import literal, page_error
from . import contrast, whatif
from .base import LATEST, MODEL, TRANSLATION, View, current_translation, translated
from .selection import MEAN, select_heads, single_layer_and_head

PLAY_DELAY_S = 0.5  # every frame redraws text and figures together, so they always show the same step


class StepsView(View):
    name, title = "steps", "Step by step"
    jumps = {"show_in_tree": "tree", "show_in_lens": "lens"}
    controls = ("step",)
    reads = ("sentence", "layer", "head")

    def build(self, context):
        with gr.Row():
            step = Slider(1, MAX_OUTPUT_TOKENS, value=1, step=1, label="Decoding step", elem_id="step")
            play = gr.Button("▶ Play steps", scale=0, elem_id="play-button")
        step_text = gr.Markdown(elem_id="step-text")
        with gr.Row():
            candidates = gr.Plot(label="Next-token candidates", elem_id="candidates-plot")
            source = gr.Plot(label="Where this step looked in the source", elem_id="step-source-plot")
        with gr.Row():
            show_in_tree = gr.Button("Show this step in the search tree", size="sm", elem_id="show-in-tree")
            show_in_lens = gr.Button("Show this step in the logit lens", size="sm", elem_id="show-in-lens")
        hypotheses = gr.Dataframe(label="Beam search: live hypotheses after this step", elem_id="hypotheses",
                                  interactive=False)
        return {"step": step, "play_button": play, "step_text": step_text, "candidates_plot": candidates,
                "step_source_plot": source, "show_in_tree": show_in_tree, "show_in_lens": show_in_lens,
                "hypotheses": hypotheses, **whatif.build_panel(), **contrast.build_panel()}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL:
            return {}
        step = state.get("step") or 1
        out = {}
        if changed in (TRANSLATION, "sentence"):  # a new output opens at its first step
            step = 1
            out["step"] = gr.update(minimum=1, maximum=len(translation.steps), value=1)
        current = translation.steps[from_shown(max(1, min(int(step), len(translation.steps))))]
        out["whatif_choice"] = gr.update(choices=whatif.alternatives(current), value=None)
        out["contrast_foil"] = gr.update(choices=whatif.alternatives(current), value=None)
        return out | step_outputs(translation, step, state["layer"], state["head"])

    def play_frames(self, translation, layer: str, head: str):
        """Every recorded step in turn, as named values: text and figures of the same step in every frame."""
        steps = len(translation.steps)
        for step in range(1, steps + 1):
            yield {"step": step, **step_outputs(translation, step, layer, head)}
            if step < steps:
                time.sleep(PLAY_DELAY_S)

    def wire(self, ui):
        def play(result, *values):
            state = ui.state_from(values)
            translation = translated(result, state)
            for frame in self.play_frames(translation, state["layer"], state["head"]):
                yield ui.by_component(frame)

        c = ui.components
        c["play_button"].click(play, ui.state_inputs, ui.outputs_of(self), api_visibility="private")

        def what_if(result, sentence, step, layer, head, candidate, typed):
            translation = translated(result, {"sentence": sentence})
            step = max(1, min(int(step or 1), len(translation.steps)))
            try:  # typed text is refused by the one Unicode rule, by its name, before the tokenizer reads it
                continuation = [candidate] if candidate else ui.service.pieces(result, typed or "")
            except ValueError as error:
                raise page_error(str(error)) from error
            if not continuation:
                raise page_error("Choose another candidate or type a continuation first.")
            try:
                alternative = ui.service.rerun(
                    result, translation, prefix=translation.tgt_tokens[: from_shown(step)] + continuation
                )
            except ValueError as error:
                raise page_error(str(error)) from error
            return ui.by_component(whatif.comparison(translation, alternative, layer, head))

        inputs = [ui.result_state, c["sentence"], c["step"], c["layer"], c["head"]]
        outputs = [c[name] for name in ("whatif_text", "whatif_original", "whatif_alternative")]
        c["whatif_choice"].input(lambda *values: what_if(*values, None), inputs + [c["whatif_choice"]], outputs,
                                 api_visibility="private", **LATEST)
        c["whatif_button"].click(lambda *values: what_if(*values[:-1], None, values[-1]), inputs + [c["whatif_typed"]],
                                 outputs, api_visibility="private")
        contrast.wire_panel(ui)


def step_outputs(translation, step, layer: str, head: str) -> dict:
    """The step view of 1-based `step`: text, candidates, source attention, hypotheses."""
    step = max(1, min(int(step), len(translation.steps)))
    current = translation.steps[from_shown(step)]
    prefix = " ".join(literal(t) for t in translation.decoder_input_tokens[:step])
    markdown = (f"**Step {step} of {len(translation.steps)}.** Decoder input so far: {prefix}  \n"
                f"Chose **{literal(current.token)}** with probability {current.prob:.1%}.")
    cross = translation.recorded["cross"]
    layer_index, head_value = single_layer_and_head(layer, head, cross.values.shape[:2])
    weights = select_heads(cross.values[:, :, from_shown(step): step], layer_index, head_value)[0]  # this step's row
    which = "mean over heads" if head_value == MEAN else head_label(int(head_value))
    return {
        "step_text": markdown,
        "candidates_plot": figures.candidates_bar(current.topk, current.token,
                                                  f"Step {step}: top {len(current.topk)} next-token candidates"),
        "step_source_plot": figures.source_attention_bar(
            weights, cross.cols, f"Step {step}: cross-attention over the source ({layer_label(layer_index)}, {which})"),
        "hypotheses": pd.DataFrame(
            [(rank + 1, h, round(score, 3)) for rank, (h, score) in enumerate(current.hypotheses or [])],
            columns=["rank", "live hypothesis after this step", "log-probability"]),
    }
