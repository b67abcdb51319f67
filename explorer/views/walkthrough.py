"""How it computed this: a walk through every operation of the forward pass on the current translation's own numbers,
for a chosen source piece and decoding step (transformer/analysis/walkthrough/, asked of the session service). The
whole walk, at every layer and head, comes to the browser as one payload (views/walkthrough_payload.py) and is drawn
there (static/walk_data.js, the data work; static/walk_render.js, the drawing), so Next, Back, the list of stages, the
overview, the walk's own Layer and Head pickers and the output's sliders never ask the server; choosing another piece
or step does, and keeps the stage. A button beside the translation opens it (WalkEntryView, with the glossary's), and
the walk saves as one HTML file that opens offline with its pickers (standalone.py)."""
from __future__ import annotations

import gradio as gr

from transformer.core.head_ref import from_shown, shown

from ..assets import WALK_CSS, WALK_JS
from ..exports import walk_file
from ..text import literal, page_error
from .base import LATEST, MODEL, TRANSLATION, View, current_translation, translated
from .walkthrough_payload import walk_payload

EMPTY = ("Translate a sentence, then press **How it computed this** beside the translation, or choose a source "
         "piece and a decoding step here and press **Walk through**.")
PROMPT = ("A translation is showing: choose a source piece and a decoding step and press **Walk through**, or press "
          "**How it computed this** beside the translation. The walk's own Layer and Head pickers choose the layer "
          "and head its stages show.")
# the Glossary button: once its tab shows, the list is scrolled into view and given the focus
GLOSSARY_JS = """() => { const started = Date.now(); const show = () => {
  const list = document.getElementById("glossary-list");
  if (list && list.offsetParent !== null) { list.setAttribute("tabindex", "-1"); list.scrollIntoView({block: "start"});
    list.focus({preventScroll: true}); } else if (Date.now() - started < 5000) setTimeout(show, 100); };
  setTimeout(show, 50); }"""
KEYS_WANTED = 3  # the walk opens on a step whose masked self-attention has at least this many keys


def token_choices(translation) -> list[tuple[str, int]]:
    return [(f"{shown(index)}: {piece}", index) for index, piece in enumerate(translation.src_tokens)]


def step_choices(translation) -> list[tuple[str, int]]:
    return [(f"{shown(index)}: {piece}", index) for index, piece in enumerate(translation.tgt_tokens)]


def opening_step(translation, chosen: int) -> tuple[int, str]:
    """The step (0-based) the walk opens on, and why: the step chosen in the Steps view when its masked
    self-attention has at least KEYS_WANTED keys (the step's decoder inputs), else the first step that has, else the
    middle step of a short translation."""
    steps = len(translation.tgt_ids)
    index = max(0, min(from_shown(chosen), steps - 1))
    keys = shown(index)  # step i (from 1) reads <s> and the pieces before it: i keys
    if keys >= KEYS_WANTED:
        return index, f"step {shown(index)}, as the Steps view shows"
    if steps >= KEYS_WANTED:
        return from_shown(KEYS_WANTED), (f"step {KEYS_WANTED}: the first step whose masked self-attention has "
                                         f"{KEYS_WANTED} keys to weigh (step 1 has one, of weight 1)")
    return steps // 2, f"step {shown(steps // 2)}, the middle of this short translation"


class WalkEntryView(View):
    """Beside the translation: the way into the walk-through and the glossary."""

    name, title = "walk_entry", "How it computed this"
    placement = "first_screen"
    jumps = {"glossary_open": "glossary"}  # "walk_open" is wired by WalkthroughView: quietly, only what it changes

    def build(self, context):
        with gr.Row(elem_id="walk-entry"):  # on a phone it follows the live picture (static/style.css)
            walk = gr.Button("How it computed this", size="sm", elem_id="walk-open", scale=0)
            glossary = gr.Button("Glossary", size="sm", elem_id="glossary-open", scale=0)
        return {"walk_open": walk, "glossary_open": glossary}

    def render(self, result, state, context, changed):
        return {}

    def wire(self, ui):
        ui.components["glossary_open"].click(None, None, None, js=GLOSSARY_JS, api_visibility="private")


class WalkthroughView(View):
    name, title = "walkthrough", "How it computed this"
    reads = ("sentence",)

    def build(self, context):
        with gr.Row():
            token = gr.Dropdown([], label="Source piece", elem_id="walk-token")
            step = gr.Dropdown([], label="Decoding step (the piece it predicts)", elem_id="walk-step")
            go = gr.Button("Walk through", elem_id="walk-button", scale=0)
        text = gr.Markdown(EMPTY, elem_id="walk-text")
        drawing = gr.HTML(None, html_template='<div class="wk-walk" tabindex="0"></div>', css_template=WALK_CSS,
                          js_on_load=WALK_JS, elem_id="walkthrough", min_height=200)
        with gr.Row():
            save = gr.Button("Save this walk as HTML (opens offline)", size="sm", elem_id="walk-save", scale=0)
            saved = gr.File(label="Saved walk", elem_id="walk-file", visible=False)
        shown_payload = gr.State(None)  # the payload drawn, which Save writes as it is
        return {"walk_token": token, "walk_step": step, "walk_button": go, "walk_text": text,
                "walk_html": drawing, "walk_save": save, "walk_file": saved, "walk_payload": shown_payload}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL or changed not in (TRANSLATION, "sentence"):
            return {}
        return {"walk_token": gr.update(choices=token_choices(translation), value=0),
                "walk_step": gr.update(choices=step_choices(translation), value=0),
                "walk_text": PROMPT, "walk_html": None, "walk_payload": None,
                "walk_file": gr.update(value=None, visible=False)}

    def at_step(self, ui, result, state, step):
        translation = translated(result, state)
        index, why = opening_step(translation, int(step))
        result.rendered_views.add(self.name)  # drawn here: opening the tab must not draw it over again
        return {"walk_token": gr.update(choices=token_choices(translation), value=0),
                "walk_step": gr.update(choices=step_choices(translation), value=index)} | self.show(
            ui, result, state.get("sentence"), 0, index, opened=why)

    def show(self, ui, result, sentence, token: int, step: int, opened: str = "") -> dict:
        translation = translated(result, {"sentence": sentence})
        try:
            walk = ui.service.walkthrough(result, translation, int(token or 0), int(step or 0))
        except ValueError as error:
            raise page_error(str(error)) from error
        payload = walk_payload(walk)
        text = (f"**{literal(translation.source)}** → **{literal(translation.text)}**: {len(walk.stages)} stages "
                f"for the source piece “{literal(payload['token_piece'])}” and step {payload['step']} "
                f"(“{literal(payload['step_piece'])}”)" + (f", opened on {opened}" if opened else "") +
                ". Use Next/Back, the list, the overview or the arrow keys (with the walk focused); its Layer and "
                "Head pickers change the layer and head in place.")
        return {"walk_text": text, "walk_html": payload, "walk_payload": payload}

    def wire(self, ui):
        c = ui.components
        inputs = [ui.result_state, c["sentence"], c["walk_token"], c["walk_step"]]
        outputs = [c["walk_text"], c["walk_html"], c["walk_payload"]]

        def chosen(result, sentence, token, step):
            return ui.by_component(self.show(ui, result, sentence, token, step))

        c["walk_button"].click(chosen, inputs, outputs, api_visibility="private")

        def opened(result, *values):  # the first screen's button: this tab, at the step the Steps view shows
            state = ui.state_from(values)
            named = self.at_step(ui, result, state, int(state.get("step") or 1))
            return ui.by_component(named) | {c["tabs"]: gr.Tabs(selected=self.name)}

        if "walk_open" in c:
            # through the queue like every request that runs the model: a class pressing it at once waits its turn
            # instead of taking the cores from the translations in flight
            c["walk_open"].click(opened, ui.state_inputs,
                                 [c["walk_token"], c["walk_step"], *outputs, c["tabs"]],
                                 api_visibility="private", **ui.quiet)
        for name in ("walk_token", "walk_step"):
            c[name].input(chosen, inputs, outputs, api_visibility="private", **LATEST)

        def save(result, sentence, payload):
            translation = translated(result, {"sentence": sentence}, then=", then save its walk")
            if payload is None:
                raise page_error("Walk through a piece and a step first (the Walk through button), then save it.")
            return gr.update(value=walk_file(result, ui.registry, translation, payload), visible=True)

        c["walk_save"].click(save, [ui.result_state, c["sentence"], c["walk_payload"]], c["walk_file"],
                             api_visibility="private")
