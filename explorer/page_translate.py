"""The page's Translate, outside Gradio's queue: the browser posts the request controls to the JSON route
(`POST api/v1/translate`, http_api.py) and sets the translation, the summary and the live picture from its answer
itself (static/translate_request.js). The answer's `result_key` names the result the server kept for this page;
once the live picture is drawn, one event without the queue adopts it (the sentence, layer and head pickers, the
language offer) and draws the open tab; other tabs draw from it when opened (wiring.wire_tab).

A bad request, a full server or a lost connection is said in the alert box under Translate, as text, and every
output keeps the last good result. An event through the queue costs the server 11-14 ms of CPU even when it does
nothing; the route costs about 0.5 ms (docs/speed.md).
"""
from __future__ import annotations

import json

import gradio as gr

from transformer.decoding.strategies import all_settings

from .assets import static_text
from .ui_state import Wiring
from .views import TRANSLATION
from .views.live import LiveView

# Runs in the browser before the result is adopted: waits until the live view has drawn the new translation (its
# numbers are inflated asynchronously, static/live_render.js) and the browser has painted it, or a second at most,
# so that neither the adoption nor the open tab's plots hold the main thread while the live picture waits.
AFTER_LIVE_VIEW_JS = """(...args) => new Promise(done => {
  const started = performance.now();
  const wait = () => {
    const pending = document.querySelector('#live-attention .ae-live[data-pending]');
    if (pending && performance.now() - started < 1000) return requestAnimationFrame(wait);
    requestAnimationFrame(() => setTimeout(() => done(args), 0));
  };
  wait();
})"""

# The alert box under Translate: the route's message set as text (it may quote the visitor's text), never markup.
ALERT_JS = """
const show = () => {
  const box = element.querySelector(".ae-alert");
  if (box) box.textContent = props.value || "";
};
show();
watch("value", show);
"""


def body_names(ui: Wiring) -> list[list]:
    """Per request control (ui.request_names, in order): its name in the route's body (the API's argument), and the
    strategy it is a setting of (null for the others)."""
    specs = {spec.key: spec for spec in all_settings()}
    return [["text" if name == "source" else specs[name].name if name in specs else name,
             specs[name].strategy if name in specs else None] for name in ui.request_names]


def translate_js(ui: Wiring) -> str:
    """The Translate event's browser function: the request controls' values in (ui.request_names, in order), then
    the live view's payload; the values of translation, summary, live view, result key and alert box out."""
    return ("async (...values) => {\n" + static_text("translate_request.js")
            + f"\nreturn translatePage({json.dumps(body_names(ui))}, values.slice(0, -1), values.at(-1));\n}}")


def alert_box() -> gr.HTML:
    return gr.HTML("", html_template='<div class="ae-alert" role="alert"></div>', js_on_load=ALERT_JS,
                   elem_id="translate-error")


def result_key_box() -> gr.Textbox:
    """Holds the key of the result the route kept for this page: set by the browser, read by the adoption."""
    return gr.Textbox("", visible="hidden", interactive=False, elem_id="result-key", show_label=False)


def wire_translate(ui: Wiring) -> None:
    """Translate (the button, or Shift+Enter in the source box, which takes a sentence per line): the route's answer
    shown by the browser, then the result adopted and the open tab drawn, both without the queue."""
    c, views = ui.components, ui.views
    browser_outputs = [c["translation"], c["summary"], c["live_attention"], c["result_key"], c["translate_error"]]
    translate = translate_js(ui)
    for trigger in (c["translate_button"].click, c["source"].submit):
        trigger(None, [c[name] for name in ui.request_names] + [c["live_attention"]], browser_outputs, js=translate,
                api_visibility="private")

    # the first screen's views other than the live view (drawn by the browser from the route's answer)
    first_screen = [v for v in views if v.placement == "first_screen"]
    drawn_here = [v for v in first_screen if v.name != LiveView.name]

    def adopt(key, *values):
        result = ui.adopt(key)
        if result is None:  # a key the server no longer keeps: the tabs have nothing to draw from
            return {ui.result_state: None}
        state = ui.fitted_state(result, ui.default_state() | ui.state_from(values))
        named = ui.shared_updates(result, state)
        del named["translation"], named["summary"]  # set by the browser
        for view in drawn_here:
            named.update(view.render(result, state, ui.context(result.model_key), TRANSLATION))
        result.rendered_views |= {view.name for view in first_screen}
        return {ui.result_state: result} | ui.by_component(named)

    def draw_open_tab(result, *values):
        *values, open_tab = values
        view = next((v for v in views if v.name == open_tab), None)
        if result is None or view is None or view.name in result.rendered_views:
            return {ui.result_state: gr.update()}
        result.rendered_views.add(view.name)
        named = ui.render_named([view], result, ui.state_from(values), result.model_key, TRANSLATION)
        return {ui.result_state: result} | ui.by_component(named)

    adopt_outputs = ([ui.result_state, c["language_offer"], c["sentence"], c["layer"], c["head"]]
                     + [component for view in drawn_here for component in ui.outputs_of(view)])
    tab_outputs = [component for view in views if view.placement == "tab" for component in ui.outputs_of(view)]
    c["result_key"].change(adopt, [c["result_key"]] + [c[name] for name in ui.state_names], adopt_outputs,
                           js=AFTER_LIVE_VIEW_JS, api_visibility="private", queue=False, **ui.quiet).success(
        draw_open_tab, ui.state_inputs + [ui.open_tab], [ui.result_state] + tab_outputs, api_visibility="private",
        queue=False, **ui.quiet)
