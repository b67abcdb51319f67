"""The page's events: Translate (page_translate.py: the JSON route, then the result adopted and the open tab
drawn), the controls that re-render exactly the views that read them, a model chosen, a tab opened, a jump between
views, and the input side (examples, strategy settings). The page's state and components live in `ui_state.Wiring`.
"""
from __future__ import annotations

import random

import gradio as gr

from transformer.decoding.strategies import all_settings

from . import controls
from .api import wire_api
from .atlas_api import atlas_endpoints
from .language_offer import wire_language_offer
from .page import PLOT_SVG_JS, decoding_path, glossary_marks_js
from .page_translate import wire_translate
from .patch_api import patch_endpoint
from .share import wire_link
from .text import examples_for, literal, placeholder_for
from .ui_state import Wiring
from .views import LATEST, MODEL, TRANSLATION, View


def wire(ui: Wiring, demo: gr.Blocks) -> None:
    wire_translate(ui)
    wire_api(ui, demo, {**atlas_endpoints(ui), "patch": patch_endpoint(ui)})
    wire_rerender(ui)
    wire_model_choice(ui, demo)
    ui.demo = demo  # a view's own page-load events (a shared run's link, views/learn.py)
    for view in ui.views:
        view.wire(ui)
        if view.placement == "tab":
            wire_tab(ui, view)
        for button, target in view.jumps.items():
            served = next((v for v in ui.views if v.name == target), None)
            if served is not None:
                wire_jump(ui, ui.components[button], served)
    wire_controls(ui)
    wire_language_offer(ui)
    wire_link(ui, demo)
    demo.load(lambda: decoding_path(ui.service.pool, ui.registry, ui.startup_notes), None, ui.components["footer"],
              api_visibility="private", queue=False, **ui.quiet)
    demo.load(None, None, None, js=PLOT_SVG_JS)
    demo.load(None, None, None, js=glossary_marks_js())


def wire_rerender(ui: Wiring) -> None:
    """A control re-renders the views that read it and are on screen, from the stored result, with no queue: the
    first screen, the open tab, and the view the control belongs to (it is changed only where it shows, even while
    its tab's opening still waits in the queue with the controls as they were). A hidden tab that read it is drawn
    afresh when opened (wire_tab)."""
    for name in ui.state_names:
        readers = [v for v in ui.views if name in v.reads or name in v.controls]
        if not readers:
            continue

        def rerender(result, *values, changed=name, readers=readers):
            *values, model_key, open_tab = values
            shown = [v for v in readers if v.placement == "first_screen" or v.name == open_tab or changed in v.controls]
            if result is not None:  # drawn before this change: drawn again when opened; drawn now: not again
                result.rendered_views -= {v.name for v in readers if v not in shown}
                result.rendered_views |= {v.name for v in shown}
            return ui.render(shown, result, ui.state_from(values), model_key, changed, readers)

        ui.components[name].input(rerender, ui.state_inputs + [ui.components["model"], ui.open_tab],
                                  [comp for v in readers for comp in ui.outputs_of(v)], api_visibility="private",
                                  queue=False, **LATEST)


def wire_model_choice(ui: Wiring, demo: gr.Blocks) -> None:
    """One request per model choice (and at page load): the views about the model, its examples, and a stale result
    marked."""
    c = ui.components
    view_outputs = [component for view in ui.views for component in ui.outputs_of(view)]

    def on_model(result, *values):
        model_key = values[-1]
        return ui.render(ui.views, result, ui.state_from(values[:-1]), model_key, MODEL) | model_inputs(
            ui, model_key, result
        )

    for event in (c["model"].change, demo.load):
        event(on_model, ui.state_inputs + [c["model"]], view_outputs + [c["example"], c["source"], c["summary"]],
              api_visibility="private", **ui.quiet)


def wire_tab(ui: Wiring, view: View) -> None:
    """Opening a tab draws its view for the current result, if the Translate that made it did not. Without the
    queue, as a control's redraw (wire_rerender) is: the browser applies answers in the order they arrive, and a
    queued answer arrives through the queue's event stream, after a redraw that began later had already answered
    (a kind chosen right after opening Attention then ended under the cross-attention heatmap)."""

    def opened(result, *values):
        out = {ui.open_tab: view.name}
        if result is None or view.name in result.rendered_views:
            return out
        result.rendered_views.add(view.name)
        named = ui.render_named([view], result, ui.state_from(values), result.model_key, TRANSLATION)
        return out | ui.by_component(named) | {ui.result_state: result}

    ui.tabs[view.name].select(opened, ui.state_inputs, [ui.open_tab, ui.result_state] + ui.outputs_of(view),
                              api_visibility="private", queue=False, **ui.quiet)
    # the open tab is known at once, so a control changed while the drawing runs redraws this tab
    ui.tabs[view.name].select(lambda: view.name, None, ui.open_tab, api_visibility="private", queue=False,
                              **ui.quiet)


def wire_jump(ui: Wiring, button, target: View) -> None:
    """A declared jump (View.jumps): the button opens `target`'s tab at the current decoding step."""

    def jump(result, *values):
        state = ui.state_from(values)
        ui.drawn_now(result, target)  # the tab this answer selects must not draw itself over it (CI: unmarked lens)
        named = target.at_step(ui, ui.prepared([target], result), state, int(state.get("step") or 1))
        return ui.by_component(named or {}) | {ui.components["tabs"]: gr.Tabs(selected=target.name),
                                               ui.open_tab: target.name, ui.result_state: result}

    button.click(jump, ui.state_inputs, ui.outputs_of(target) + [ui.components["tabs"], ui.open_tab,
                                                                 ui.result_state],
                 api_visibility="private")


def model_inputs(ui: Wiring, model_key: str, result) -> dict:
    """The examples in the model's source language, and a note when the shown result is another model's."""
    c = ui.components
    stale = result is not None and result.model_key != model_key
    note = (f"⚠️ The result below is from **{literal(ui.registry.get(result.model_key).label)}**; press Translate "
            f"to translate with **{literal(ui.registry.get(model_key).label)}**." if stale else gr.update())
    language = ui.registry.source_language(model_key)
    return {c["example"]: gr.update(choices=examples_for(language), value=None),
            c["source"]: gr.update(placeholder=placeholder_for(language)), c["summary"]: note}


def wire_controls(ui: Wiring) -> None:
    """The input side: examples, the model's language, which settings show, and a result gone stale."""
    c = ui.components
    c["example"].input(lambda sentence: sentence, c["example"], c["source"], api_visibility="private", queue=False,
                       **LATEST)

    specs = all_settings()
    if "sample.seed" in c:  # sampling: the same seed gives the same output, so offer a new one
        c["new_seed"].click(lambda: random.randrange(2**31 - 1), None, c["sample.seed"], api_visibility="private",
                            queue=False).then(None, None, None, js="() => document.querySelector('#translate-button')"
                                              ".click()")

    def on_strategy(strategy):  # only the chosen strategy's settings are shown
        shown = {c[spec.key]: gr.update(visible=spec.strategy == strategy) for spec in specs}
        return shown | {c["new_seed"]: gr.update(visible=strategy == "sample")}

    def on_model_input(model_key):  # a model chosen by the visitor brings the decoding its model card reports
        strategy, recorded = ui.registry.get(model_key).translator.recorded_decoding()
        values = controls.decoding_values(strategy, recorded)
        # and its languages: offered for a multilingual model, at the direction it was converted for
        codes, defaults = ui.registry.languages(model_key), ui.registry.default_languages(model_key)
        languages = {c[name]: gr.update(choices=codes, value=default, visible=bool(codes))
                     for name, default in zip(("source_lang", "target_lang"), defaults)}
        return {c["strategy"]: strategy} | {c[name]: value for name, value in values.items()} | languages

    c["model"].input(on_model_input, c["model"], [c["strategy"], c["source_lang"], c["target_lang"]]
                     + [c[spec.key] for spec in specs],
                     api_visibility="private", queue=False, **LATEST)
    c["strategy"].change(on_strategy, c["strategy"], [c[spec.key] for spec in specs] + [c["new_seed"]],
                         api_visibility="private",
                         queue=False)
