"""Why X and not Y, under the step view: pick a candidate the model did not choose at this step, and see which
source pieces and which words already written pushed the choice towards the chosen word or towards that one
(contrastive input × gradient of the log-odds, analysis/contrastive.py, and its ALTI-Logit through the layers,
analysis/alti_logit.py, asked of the session service)."""
from __future__ import annotations

import gradio as gr

from transformer.core.head_ref import shown

from ..figures.steps import contrast_bar
from ..text import literal, page_error
from .base import translated


def build_panel() -> dict:
    with gr.Accordion("Why this word and not another?", open=True):
        with gr.Row():
            foil = gr.Dropdown([], label="…and not this candidate", elem_id="contrast-foil")
            go = gr.Button("Why?", elem_id="contrast-button", scale=0)
        text = gr.Markdown(elem_id="contrast-text")
        plot = gr.Plot(label="What pushed the choice", elem_id="contrast-plot")
    return {"contrast_foil": foil, "contrast_button": go, "contrast_text": text, "contrast_plot": plot}


def explained(translation, contrast, foil: str) -> dict:
    """The panel's text and figure for a Contrast of `translation` (analysis/contrastive.py)."""
    step = shown(contrast.step)
    chosen = translation.tgt_tokens[contrast.step]
    p_chosen = translation.steps[contrast.step].prob
    prefix = translation.decoder_input_tokens[:step]
    strongest = max(
        zip([*translation.src_tokens, *prefix], [*contrast.source, *contrast.prefix]), key=lambda x: abs(x[1])
    )
    text = (
        f"**Step {step}: why “{literal(chosen)}” ({p_chosen:.1%}) and not “{literal(foil)}”?** The log-odds "
        f"log p({literal(chosen)}) − log p({literal(foil)}) is **{contrast.log_odds:+.2f}**. Each bar is an input's "
        f"first-order push on it (input × gradient; right: towards “{literal(chosen)}”, left: towards "
        f"“{literal(foil)}”); the strongest is “{literal(strongest[0])}” ({strongest[1]:+.2f}). Source total "
        f"{contrast.source.sum():+.2f}, the words so far {contrast.prefix.sum():+.2f}."
    )
    layers = contrast.layers
    if layers is not None:
        decisive = max(zip([*translation.src_tokens, *prefix], [*layers.source, *layers.prefix]), key=lambda x: x[1])
        text += (f" Read through the layers (hatched bars: ALTI-Logit, Ferrando et al., 2023, each input's share of "
                 f"the log-odds, as ALTI+ traces what each position is made of; feed-forward blocks and layer norms "
                 f"shared by its proportions), the source carries **{layers.source.sum():+.2f}**, the words so far "
                 f"{layers.prefix.sum():+.2f} and the biases {layers.biases:+.2f}, adding up to the log-odds; "
                 f"the input that most favours “{literal(chosen)}” is “{literal(decisive[0])}” ({decisive[1]:+.2f}).")
    figure = contrast_bar(contrast.source, translation.src_tokens, contrast.prefix, prefix,
                          f"Step {step}: “{chosen}” rather than “{foil}”",
                          None if layers is None else (layers.source, layers.prefix))
    return {"contrast_text": text, "contrast_plot": figure}


def wire_panel(ui) -> None:
    c = ui.components

    def why(result, sentence, step, foil):
        translation = translated(result, {"sentence": sentence})
        if not foil:
            raise page_error("Choose a candidate to compare with first.")
        step = max(1, min(int(step or 1), len(translation.steps)))
        try:
            contrast = ui.service.contrast(result, translation, step, foil)
        except ValueError as error:
            raise page_error(str(error)) from error
        return ui.by_component(explained(translation, contrast, foil))

    c["contrast_button"].click(why, [ui.result_state, c["sentence"], c["step"], c["contrast_foil"]],
                               [c["contrast_text"], c["contrast_plot"]], api_visibility="private")
