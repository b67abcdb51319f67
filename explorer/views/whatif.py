"""What if: the step view's other candidates, or a typed continuation, forced as the start of a second
translation that then decodes freely (the session service's rerun, with the result's own strategy and settings);
shown under the first with the step where they part marked."""
from __future__ import annotations

import gradio as gr

from ..text import literal
from .attention import attention_figure
from .base import plot_row
from .selection import single_layer_and_head


def alternatives(step) -> list[tuple[str, str]]:
    """The candidates of a step other than the one chosen, as (label, piece) choices."""
    return [(f"{piece} ({prob:.1%})", piece) for piece, prob in step.topk if piece != step.token]


def parting_step(first: list[str], second: list[str]) -> int:
    """1-based step at which two outputs first differ."""
    for index, (a, b) in enumerate(zip(first, second)):
        if a != b:
            return index + 1
    return min(len(first), len(second)) + 1


def comparison(original, alternative, layer: str, head: str) -> dict:
    part = parting_step(original.tgt_tokens, alternative.tgt_tokens)

    def marked(tokens):
        return " ".join(f"**[{literal(t)}]**" if i + 1 == part else literal(t) for i, t in enumerate(tokens))

    layer_index, head_value = single_layer_and_head(layer, head, original.recorded["cross"].values.shape[:2])
    return {
        "whatif_text": (f"They part at **step {part}** (bracketed).  \n**As translated:** {literal(original.text)}  \n"
                        f"{marked(original.tgt_tokens)}  \n**What if:** {literal(alternative.text)}  \n"
                        f"{marked(alternative.tgt_tokens)}  \nThe forced steps keep the probability the model gave "
                        f"them: {', '.join(f'{s.token} {s.prob:.1%}' for s in alternative.steps if s.forced)}."),
        "whatif_original": attention_figure(original.recorded["cross"], str(layer_index), head_value, False),
        "whatif_alternative": attention_figure(alternative.recorded["cross"], str(layer_index), head_value, False),
    }


def build_panel() -> dict:
    with gr.Accordion("What if it had chosen another word?", open=True):
        with gr.Row():
            choice = gr.Radio([], label="Another candidate at this step", elem_id="whatif-choice")
            with gr.Column():
                typed = gr.Textbox(label="…or type a continuation from this step", elem_id="whatif-typed", max_lines=1)
                go = gr.Button("Continue from here", elem_id="whatif-button")
        text = gr.Markdown(elem_id="whatif-text")
        plots = plot_row(whatif_original=("Cross-attention as translated", "whatif-original"),
                         whatif_alternative=("Cross-attention, what if", "whatif-alternative"))
    return {"whatif_choice": choice, "whatif_typed": typed, "whatif_button": go, "whatif_text": text, **plots}
