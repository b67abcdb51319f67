"""Cause: what causes one word of the translation (activation patching, transformer/analysis/causal, asked of the
session service). The visitor types a corrupted sentence (or asks for noise on one source piece) and picks the
target piece; the tab shows both translations side by side, the encoder trace (layer x source position, per site
kind) and the head matrices (cross-attention first), hover giving the number and what was patched. Clicking a cell
decodes the corrupted sentence again with that one patch held. The docs' worked example (docs/patching.md) is one
click away; a picker puts a word in place of one source piece (the rule `--replace-piece` uses); the cells where
attribution patching disagrees with the exact share are listed. Nothing runs until its button is pressed."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from transformer.analysis.causal.estimate import DISAGREE
from transformer.analysis.causal.question import NOISE_TIMES_STD, replaced_source, same_count_suggestions
from transformer.analysis.causal.redecode import parse_hold

from ..batching import Overloaded, busy_message
from ..exports import cause_file
from ..figures.cause import DISAGREEMENT_COLUMNS, disagreement_rows, disagreements_table, heads_figure, trace_figure
from ..request import Request, RequestError
from ..text import literal, page_error
from .base import LATEST, TRANSLATION, View, current_translation, translated

HOW_TO_READ = (
    "**How to read this.** The model runs twice: on your sentence (clean) and on the corrupted one. Then, one site "
    "at a time, the clean run's value is put back into the corrupted run (activation patching), and each cell shows "
    "the **restored share** of the target piece's probability: 1 (blue) when putting that one value back brings the "
    "clean prediction back entirely, 0 (white) when it changes nothing, below 0 (red) when it pushes further away. "
    "The first picture is the encoder, layer by layer and position by position (causal tracing); the second, every "
    "head, cross-attention first, and each cross-attention head reading the clean source alone. Attribution "
    "patching, a one-pass estimate of all cells, is compared with them below. Click a cell to translate the "
    "corrupted sentence again with that one value held.")
PROMPT = ("Type a corrupted sentence (or replace one source piece, or choose noise), pick the target piece, and "
          "press **Find the cause**.")


@dataclass(frozen=True)
class WorkedPair:
    """A clean sentence, its corrupted twin and the piece to explain, on the model they were measured on."""

    model: str
    clean: str
    corrupted: str
    target: int  # from 1, a piece of the clean translation
    contrast: str


# docs/patching.md's worked example (tests/test_cause_tab.py checks that the page and the docs tell the same)
EXAMPLE = WorkedPair("en-de", "The old man sits on the bank of the river.",
                     "The old man sits on the bank of the city.", 8, "▁der")
EXAMPLE_LABEL = "Try the example: “… of the river.” against “… of the city.” (en-de, piece 8, “des” or “der”?)"
TRANSLATE_JS = "() => document.querySelector('#translate-button').click()"
# what the picker's and the hold's buttons say when pressed too early (tests/test_browser_clicks.py allows them)
PIECE_FIRST = "Source piece: choose the piece to replace first."
HOLD_FIRST = "Held cell: click a cell of a picture first, or type one."
# clicking a heatmap cell: its `hold` text (figures/cause.py) into the hold box, then the hold button pressed
CLICK_JS = """() => {
  if (window.__causeClicks) return; window.__causeClicks = true;
  document.addEventListener('click', (event) => {
    const plot = event.target.closest && event.target.closest('#cause-trace, #cause-heads');
    const graph = plot && plot.querySelector('.js-plotly-plot');
    const point = graph && graph._hoverdata && graph._hoverdata[0];
    if (!point || !point.customdata) return;
    const box = document.querySelector('#cause-hold textarea, #cause-hold input');
    box.value = point.customdata; box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(() => document.querySelector('#cause-hold-button').click(), 100);
  });
}"""


class CauseView(View):
    name, title = "cause", "Cause"
    reads = ("sentence",)

    def build(self, context):
        gr.Markdown(HOW_TO_READ, elem_id="cause-how")
        example = gr.Button(EXAMPLE_LABEL, elem_id="cause-example", size="sm",
                            visible=EXAMPLE.model in context.profiles)
        with gr.Row():
            corrupted = gr.Textbox(label="Corrupted sentence (the other run of activation patching)", max_lines=2,
                                   elem_id="cause-corrupted", placeholder=f"e.g. {EXAMPLE.corrupted}", scale=3)
            target = gr.Number(label="Target piece (from 1)", value=1, precision=0, minimum=1,
                               elem_id="cause-target", scale=1)
            contrast = gr.Textbox(label="Logit difference against this piece (optional)", elem_id="cause-contrast",
                                  scale=1)
        with gr.Row(elem_id="cause-picker"):
            piece = gr.Dropdown([], value=None, label="Or replace one source piece", elem_id="cause-piece", scale=2)
            replacement = gr.Dropdown([], value=None, allow_custom_value=True, elem_id="cause-replacement", scale=2,
                                      label="…by this word (suggestions keep the piece count; or type one)")
            replace = gr.Button("Put it in the corrupted sentence", elem_id="cause-replace", scale=1)
        noise = gr.Checkbox(label=f"Instead: noise on the source piece below ({NOISE_TIMES_STD:g} × the "
                                  "embeddings' standard deviation, as ROME)", elem_id="cause-noise")
        noise_word = gr.Number(label="Noised source piece (from 1)", value=1, precision=0, minimum=1,
                               elem_id="cause-noise-word")
        button = gr.Button("Find the cause", elem_id="cause-button", variant="primary")
        text = gr.Markdown(PROMPT, elem_id="cause-text")
        trace = gr.Plot(label="Encoder trace", elem_id="cause-trace")
        heads = gr.Plot(label="Heads", elem_id="cause-heads")
        agreement = gr.Markdown(elem_id="cause-agreement")
        disagreements = gr.Dataframe(headers=DISAGREEMENT_COLUMNS, interactive=False, max_height=420,
                                     elem_id="cause-disagreements", label="Where attribution patching disagrees with "
                                     f"the exact share (by more than {DISAGREE:g})")
        with gr.Row():
            hold = gr.Textbox(label="Held cell", elem_id="cause-hold", scale=3,
                              placeholder="click a cell, or type e.g. trace residual 2 5, heads cross 1 3")
            hold_button = gr.Button("Translate with it held", elem_id="cause-hold-button", scale=1)
        held = gr.Markdown(elem_id="cause-held")
        save = gr.Button("Save this tab as one HTML file", elem_id="cause-save", size="sm")
        saved = gr.File(label="The tab as HTML (opens offline)", elem_id="cause-file")
        shown = gr.State(None)  # the last pictures' summary, figures and agreement, for the saved file
        return {"cause_example": example, "cause_corrupted": corrupted, "cause_target": target,
                "cause_contrast": contrast, "cause_piece": piece, "cause_replacement": replacement,
                "cause_replace": replace, "cause_noise": noise, "cause_noise_word": noise_word, "cause_button": button,
                "cause_text": text, "cause_trace": trace, "cause_heads": heads, "cause_agreement": agreement,
                "cause_disagreements": disagreements, "cause_hold": hold, "cause_hold_button": hold_button,
                "cause_held": held, "cause_save": save, "cause_file": saved, "cause_shown": shown}

    def render(self, result, state, context, changed):
        if changed in (TRANSLATION, "sentence"):  # the pictures belong to one sentence: cleared for another
            translation = current_translation(result, state)
            pieces = [] if translation is None else source_choices(translation.src_tokens)
            return {"cause_text": PROMPT, "cause_trace": None, "cause_heads": None, "cause_agreement": "",
                    "cause_disagreements": None, "cause_held": "", "cause_shown": None, "cause_file": None,
                    "cause_piece": gr.update(choices=pieces, value=None),
                    "cause_replacement": gr.update(choices=[], value=None)}
        return {}

    def wire(self, ui):
        c = ui.components
        inputs = [ui.result_state, c["sentence"], c["cause_corrupted"], c["cause_target"], c["cause_contrast"],
                  c["cause_noise"], c["cause_noise_word"]]
        c["cause_button"].click(lambda *values: found_cause(ui, *values), inputs,
                                [c["cause_text"], c["cause_trace"], c["cause_heads"], c["cause_agreement"],
                                 c["cause_disagreements"], c["cause_shown"]], api_visibility="private")
        c["cause_save"].click(lambda result, shown: saved_file(ui, result, shown), [ui.result_state, c["cause_shown"]],
                              [c["cause_file"]], api_visibility="private")
        c["cause_hold_button"].click(lambda *values: held_translation(ui, *values), inputs + [c["cause_hold"]],
                                     [c["cause_held"]], api_visibility="private")
        c["cause_trace"].change(None, None, None, js=CLICK_JS)
        picked = [ui.result_state, c["sentence"], c["cause_piece"]]
        c["cause_piece"].input(lambda *values: suggested(ui, *values), picked, [c["cause_replacement"]],
                               api_visibility="private", **LATEST)
        c["cause_replace"].click(lambda *values: {c["cause_corrupted"]: replaced(*values), c["cause_noise"]: False},
                                 picked + [c["cause_replacement"]], [c["cause_corrupted"], c["cause_noise"]],
                                 api_visibility="private")
        example_fields = [c["source"], c["model"], c["cause_corrupted"], c["cause_target"], c["cause_contrast"],
                          c["cause_noise"]]
        c["cause_example"].click(lambda model: example_values(model, example_fields), c["model"], example_fields,
                                 api_visibility="private", queue=False).then(None, None, None, js=TRANSLATE_JS)


def source_choices(src_tokens: list[str]) -> list[tuple[str, int]]:
    """The source pieces a visitor may replace (all but the EOS), as (label, number from 1)."""
    return [(f"{number}: {piece}", number) for number, piece in enumerate(src_tokens[:-1], start=1)]


def example_values(model: str, fields: list) -> dict:
    """The worked pair in the page's fields (its model chosen where another is), to be translated."""
    values = [EXAMPLE.clean, EXAMPLE.model if model != EXAMPLE.model else gr.update(), EXAMPLE.corrupted,
              EXAMPLE.target, EXAMPLE.contrast, False]
    return dict(zip(fields, values))


def suggested(ui, result, sentence, piece):
    """Words that could replace source piece `piece` (from 1) and keep the piece count, nearest first (the
    suggestions `--replace-piece` takes the first of)."""
    translation = translated(result, {"sentence": sentence}, ", then replace one of its pieces")
    if piece is None:
        return gr.update(choices=[], value=None)
    access = ui.service.access(result)
    try:
        found = same_count_suggestions(access.model, access.tokenizer, translation.src_ids, int(piece) - 1)
    except ValueError as error:
        raise page_error(str(error)) from error
    words = [suggestion.lstrip("▁") for suggestion in found]
    return gr.update(choices=words, value=words[0] if words else None)


def replaced(result, sentence, piece, replacement) -> str:
    """The corrupted sentence: the clean source with piece `piece` (from 1) replaced by `replacement`, by the rule
    `--replace-piece` uses (analysis/causal/question.py)."""
    translation = translated(result, {"sentence": sentence}, ", then replace one of its pieces")
    if piece is None:
        raise page_error(PIECE_FIRST)
    try:
        return replaced_source(translation.src_tokens, int(piece) - 1, replacement or "")
    except ValueError as error:
        raise page_error(str(error)) from error


def question(result, sentence, corrupted, target, contrast, noise, noise_word):
    """(translation, corrupted text or None, target, contrast or None, noised piece or None) as the tab asks."""
    translation = translated(result, {"sentence": sentence}, ", then find what causes a word")
    if not noise and not (corrupted or "").strip():
        raise page_error("Corrupted sentence: it is empty; type one, or choose noise on a source piece.")
    if target is None or not 1 <= int(target) <= len(translation.tgt_ids):
        raise page_error(f"Target piece must be in [1, {len(translation.tgt_ids)}] for this translation.")
    return translation, (None if noise else corrupted), int(target), (contrast or None), (
        int(noise_word or 1) if noise else None)


def corrupted_translation(ui, result, corrupted: str) -> str:
    """The corrupted sentence translated as the result's request asks (the same model, strategy and settings)."""
    request = result.request
    try:
        asked = Request.build(ui.registry, corrupted, result.model_key, result.device, request.strategy,
                              request.settings, request.max_length)
    except RequestError as error:
        raise page_error(f"Corrupted sentence: {error}") from error
    if len(asked.lines) > 1:
        raise page_error("Corrupted sentence: one sentence on one line.")
    try:
        return ui.service.run(asked, frozenset()).translations[0].text
    except Overloaded as error:
        raise page_error(busy_message(error)) from None


def found_cause(ui, result, *values) -> dict:
    c = ui.components
    translation, corrupted, target, contrast, noise_word = question(result, *values)
    other = "" if corrupted is None else corrupted_translation(ui, result, corrupted)
    try:
        found = ui.service.patching(result, translation, corrupted, target, contrast, ("trace", "heads", "path",
                                    "attribution"), noise_word, NOISE_TIMES_STD)
    except ValueError as error:
        raise page_error(str(error)) from error
    trace = trace_figure([g for g in found.grids if g.analysis == "trace"], translation.src_tokens)
    heads = heads_figure([g for g in found.grids if g.analysis in ("heads", "path")])
    text = summary(translation, found, corrupted, other, target, noise_word)
    rows = disagreement_rows(found.disagreements, translation.src_tokens)
    agreement = (f"Attribution patching against the exact cells: rank correlation "
                 f"{'n/a' if found.rank_correlation is None else f'{found.rank_correlation:.2f}'}; "
                 f"{len(rows)} cells differ by more than {DISAGREE:g}" + (", listed below." if rows else "."))
    figures = [trace, heads] + ([disagreements_table(rows)] if rows else [])
    return {c["cause_text"]: text, c["cause_trace"]: trace, c["cause_heads"]: heads,
            c["cause_agreement"]: f'<p class="ae-title">{agreement}</p>',  # a title: the page's glossary marks it
            c["cause_disagreements"]: rows or None, c["cause_shown"]: (text, figures, agreement)}


def saved_file(ui, result, shown) -> str:
    if result is None or shown is None:
        raise page_error("Find the cause first, then save it.")
    return cause_file(result, ui.registry, *shown)


def summary(translation, found, corrupted, other, target, noise_word) -> str:
    """Both translations side by side, the target piece's probabilities and what is not lined up."""
    piece = translation.tgt_tokens[target - 1]
    corrupted_line = (f"noise on source piece {noise_word} (“{literal(translation.src_tokens[noise_word - 1])}”, "
                      f"scale {found.question.noise_scale:.2f})" if corrupted is None else
                      f"“{literal(corrupted)}” → “{literal(other)}”")
    text = (f"| | sentence → translation |\n|---|---|\n| clean | “{literal(translation.source)}” → "
            f"“{literal(translation.text)}” |\n| corrupted | {corrupted_line} |\n\n"
            f"Target piece {target}: “{literal(piece)}”, p = {found.p_clean:.3f} clean, "
            f"{found.p_corrupted:.3f} corrupted.")
    unaligned = [i + 1 for i in range(len(translation.src_ids)) if i not in dict(found.aligned)]
    if unaligned:
        text += (f" The sentences differ in length: clean positions {unaligned} line up with no corrupted position "
                 "and are not patched.")
    return text


def held_translation(ui, result, *values) -> str:
    typed = values[-1]
    translation, corrupted, target, _, noise_word = question(result, *values[:-1])
    if not (typed or "").strip():
        raise page_error(HOLD_FIRST)
    try:
        text = ui.service.held_translation(result, translation, corrupted, target, noise_word, NOISE_TIMES_STD,
                                           parse_hold(typed))
    except ValueError as error:
        raise page_error(str(error)) from error
    return f"With **{literal(typed)}** held, the corrupted sentence translates as: “{literal(text)}”"
