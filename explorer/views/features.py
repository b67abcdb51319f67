"""Features: the translation read through a sparse dictionary (transformer/features, docs/features.md). The visitor
picks one of the model's dictionaries (a recording point); the tab shows the sentence's tokens, each with its
strongest latents. Choosing a latent shows what it is (label, contexts from the catalogue's corpus, histogram, the
pieces it promotes); Turn it off / Turn it up translate again with the latent steered, beside the translation as it
is. The point, the latent and the multiple go into the share link; the tab saves as one offline HTML file. Drawn when
the tab is first opened: the readings come from the server's model, in this process, as the JSON API's do.

The tab opens with no latent chosen, and so with no latent's page, no steering and no latent in the share link: the
latent and the multiple are text boxes, empty until a visitor fills them. Gradio's page shows a gr.Number without a
value as 0 and sends 0 (its 6.31 front end sets `value ??= 0`), so as Numbers they would choose latent 0, turned off,
on every first open."""
from __future__ import annotations

from functools import lru_cache

import gradio as gr

from transformer.features import DictionaryError
from transformer.features.reading import describe, sentence_latents
from transformer.features.steering import MAX_SCALE, Edit, steer
from transformer.numbers import NumberError, parsed_number

from ..exports import features_file
from ..features_api import catalogue_at, dictionary_at, folders, folders_in
from ..figures.features import histogram_figure, latent_html, steered_html, tokens_html
from ..text import page_error
from .base import MODEL, TRANSLATION, View, current_translation, translated

HOW_TO_READ = (
    "**How to read this.** A sparse dictionary splits the model's vector at one point into a few of its thousands "
    "of directions (latents), each active on few tokens. Below, each token carries its strongest latents; a latent's "
    "label is the pieces it is strongest on. Choose a latent to see its strongest contexts and histogram, then turn "
    "it off or up to see how the translation changes.")
PROMPT = "Translate a sentence to read it through the dictionary."
NO_DICTIONARY = "This model has no dictionary; `python -m transformer.features train` makes one (docs/features.md)."
UP = 3.0  # Turn it up: the multiple
# a latent button (figures/features.py) puts its number in the Latent field and presses Show
CLICK_JS = """() => {
  if (window.__featureClicks) return; window.__featureClicks = true;
  document.addEventListener('click', (event) => {
    const button = event.target.closest && event.target.closest('#features-tokens .ae-latent');
    if (!button) return;
    const box = document.querySelector('#features-latent input');
    box.value = button.dataset.latent; box.dispatchEvent(new Event('input', {bubbles: true}));
    setTimeout(() => document.querySelector('#features-show').click(), 100);
  });
}"""


class FeaturesView(View):
    name, title = "features", "Features"
    reads = ("sentence",)
    controls = ("features_point", "features_latent", "features_scale")

    def build(self, context):
        gr.Markdown(HOW_TO_READ, elem_id="features-how")
        with gr.Row():
            offered = points_of(context.profile)
            # another model's points come by a model change, and Gradio checks a value against the choices the
            # component was built with: any value passes here, and opened() names one the model does not have
            point = gr.Dropdown(offered, value=offered[0] if offered else None, elem_id="features-point", scale=2,
                                label="Dictionary (recording point)", allow_custom_value=True)
            latent = gr.Textbox(label="Latent (from 0)", value="", placeholder="a button below, or its number", lines=1,
                                max_lines=1, elem_id="features-latent", scale=1)
            show = gr.Button("Show this latent", elem_id="features-show", scale=1)
        tokens = gr.HTML(PROMPT, elem_id="features-tokens")
        about = gr.HTML("", elem_id="features-about")
        histogram = gr.Plot(label="Histogram", elem_id="features-histogram")
        with gr.Row():
            off = gr.Button("Turn it off", elem_id="features-off", variant="primary", scale=1)
            up = gr.Button(f"Turn it up (× {UP:g})", elem_id="features-up", scale=1)
            scale = gr.Textbox(label=f"Or this multiple (0 off, 1 as it is; within ±{MAX_SCALE:g})", value="",
                               placeholder="e.g. 2", lines=1, max_lines=1, elem_id="features-scale", scale=1)
            steer_button = gr.Button("Translate with this multiple", elem_id="features-steer", scale=1)
        steered = gr.HTML("", elem_id="features-steered")
        save = gr.Button("Save this tab as one HTML file", elem_id="features-save", size="sm")
        saved = gr.File(label="The tab as HTML (opens offline)", elem_id="features-file")
        return {"features_point": point, "features_latent": latent, "features_show": show, "features_tokens": tokens,
                "features_about": about, "features_histogram": histogram, "features_off": off, "features_up": up,
                "features_scale": scale, "features_steer": steer_button, "features_steered": steered,
                "features_save": save, "features_file": saved}

    def render(self, result, state, context, changed):
        if changed == MODEL:
            found = points_of(context.profile)
            # the point chosen is kept where the model has it (a share link may have restored it as the page loaded)
            kept = state.get("features_point") in found
            named = {"features_point": gr.update(choices=found) if kept else gr.update(
                choices=found, value=found[0] if found else None)}
            if not found or (result is not None and result.model_key != context.model_key):  # the pictures are stale
                named |= {"features_tokens": PROMPT if found else NO_DICTIONARY, "features_about": "",
                          "features_histogram": None, "features_steered": ""}
            return named
        if changed not in (TRANSLATION, "sentence", "features_point", "features_latent"):
            return {}
        if current_translation(result, state) is None or not state.get("features_point") or context.registry is None:
            return {}
        try:
            return drawn(context.registry, result, state, steered=changed == TRANSLATION)
        except DictionaryError as error:
            raise page_error(str(error)) from None

    def wire(self, ui):
        c = ui.components
        inputs = [ui.result_state, c["sentence"], c["features_point"], c["features_latent"]]
        shown = [c["features_tokens"], c["features_about"], c["features_histogram"], c["features_steered"]]
        c["features_show"].click(lambda *values: by_component(c, drawn(ui.registry, *state_of(values))), inputs,
                                 shown, api_visibility="private")
        for button, multiple in ((c["features_off"], 0.0), (c["features_up"], UP), (c["features_steer"], None)):
            button.click(lambda *values, multiple=multiple: steered_now(ui, c, multiple, *values),
                         inputs + [c["features_scale"]], [c["features_steered"], c["features_scale"]],
                         api_visibility="private")
        c["features_save"].click(lambda *values: saved_file(ui, *state_of(values)), inputs + [c["features_scale"]],
                                 [c["features_file"]], api_visibility="private")
        c["features_tokens"].change(None, None, None, js=CLICK_JS)


def points_of(profile) -> list[str]:
    """The model's dictionaries' points, in the order offered (point_order)."""
    checkpoint = profile.weights_file.parent if profile.weights_file else None
    return sorted(folders_in(checkpoint), key=point_order)


def point_order(point: str) -> tuple:
    """The encoder's points first, the last layer first: the first a visitor sees reads the whole source."""
    layer = next((int(part) for part in point.split(".") if part.isdigit()), 0)
    return not point.startswith("encoder"), -layer, point


def state_of(values) -> tuple:
    """(result, view state) from the handlers' inputs: the result, the sentence, the point, the latent and, where
    given, the multiple."""
    result, sentence, point, latent, *scale = values
    return result, {"sentence": sentence, "features_point": point, "features_latent": latent,
                    "features_scale": scale[0] if scale else None}


def by_component(components: dict, named: dict) -> dict:
    return {components[name]: value for name, value in named.items()}


@lru_cache(maxsize=256)
def reading(translator, folder: str, src_ids: tuple, tgt_ids: tuple):
    """A sentence's latents, cached: opening the tab again, or choosing another latent, reads nothing again."""
    return sentence_latents(translator, dictionary_at(folder), list(src_ids), list(tgt_ids))


def opened(registry, result, state: dict):
    """(translation, translator, saved dictionary, its folder) for the state's sentence and point."""
    translation = translated(result, state, ", then read it through a dictionary")
    translator = registry.get(result.model_key).translator
    found = folders(translator)
    point = state.get("features_point")
    if point not in found:
        raise page_error(f"Dictionary: model {result.model_key} has none at {point!r}; choose one of {sorted(found)}.")
    return translation, translator, dictionary_at(str(found[point])), found[point]


def chosen_latent(saved, latent) -> int | None:
    """The latent the visitor chose (the box's text, or a link's number), or None while the box is empty."""
    return typed_number("Latent", latent, int, 0, saved.dictionary.config.n - 1)


def chosen_multiple(multiple) -> float | None:
    """The multiple typed (or a link's), or None while the box is empty."""
    return typed_number("Multiple", multiple, float, -MAX_SCALE, MAX_SCALE)


def typed_number(name: str, value, kind: type, low, high):
    """A text box's number (the one number rule: transformer/numbers.py), None where it is empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return parsed_number(name, value, kind, low, high)
    except NumberError as error:
        raise page_error(f"{error}.") from None


def drawn(registry, result, state: dict, steered: bool = False) -> dict:
    """The tab's pictures for the state's sentence, point and latent (and, `steered`, the latent steered by the
    state's multiple, as a link restores it)."""
    translation, translator, saved, folder = opened(registry, result, state)
    read = reading(translator, str(folder), tuple(translation.src_ids), tuple(translation.tgt_ids))
    try:
        catalogue = catalogue_at(str(folder), saved.dictionary.config.n)
    except DictionaryError:
        catalogue = None  # a dictionary without its catalogue: latents without labels or contexts
    piece = translator.tokenizer.id_to_piece
    shown = {j for j, _, _ in read.strongest()} | {j for p in range(len(read.tokens)) for j, _ in read.top_of(p)}
    labels = {j: catalogue.label(j, piece) for j in shown} if catalogue else {}
    latent = chosen_latent(saved, state.get("features_latent"))
    named = {"features_tokens": tokens_html(read, labels), "features_about": "", "features_histogram": None,
             "features_steered": ""}
    if latent is not None and catalogue is not None:
        described = describe(translator, saved, catalogue, latent)
        named |= {"features_about": latent_html(described), "features_histogram": histogram_figure(described)}
    elif latent is not None:
        named["features_about"] = f"<p>Latent {latent}: this dictionary has no catalogue of contexts.</p>"
    multiple = chosen_multiple(state.get("features_scale"))
    if steered and latent is not None and multiple is not None:
        named["features_steered"] = steered_text(translator, saved, translation.source, latent, multiple)
    return named


def steered_text(translator, saved, source: str, latent: int, multiple: float) -> str:
    result = steer(translator, saved, source, [Edit(latent, multiple)], strategy="greedy")
    return steered_html(latent, multiple, result.before, result.after)


def steered_now(ui, c, multiple, result, sentence, point, latent, typed) -> dict:
    """A Turn it off / up / multiple button: the translation with the chosen latent steered."""
    translation, translator, saved, _ = opened(ui.registry, result, {"sentence": sentence, "features_point": point})
    latent = chosen_latent(saved, latent)
    if latent is None:
        raise page_error("Latent: choose one first (a button beside a token, or type its number).")
    multiple = chosen_multiple(typed) if multiple is None else multiple
    if multiple is None:
        raise page_error("Multiple: type one first (0 turns the latent off, 1 keeps it).")
    text = steered_text(translator, saved, translation.source, latent, multiple)
    return {c["features_steered"]: text, c["features_scale"]: f"{multiple:g}"}


def saved_file(ui, result, state: dict) -> str:
    if current_translation(result, state) is None or not state.get("features_point"):
        raise page_error("Translate a sentence and choose a dictionary first, then save the tab.")
    named = drawn(ui.registry, result, state, steered=True)
    return features_file(result, ui.registry, state["features_point"], named)
