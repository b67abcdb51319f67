"""The page's wiring: components by name, the stored result and the view state (`Wiring`), and the events
that translate, validate, re-render exactly the views a control affects, and draw a tab when it opens.

Handlers return dicts keyed by component; views return dicts keyed by name (`Wiring.by_component` maps).
"""
from __future__ import annotations

import random
from collections.abc import Callable

import gradio as gr

from transformer.decoding.strategies import all_settings

from . import controls
from .api import run_request, summary, wire_api
from .language_offer import offer_update, wire_language_offer
from .page import PLOT_SVG_JS, decoding_path, glossary_marks_js
from .registry import Registry
from .request import Request, RequestError
from .session import ModelService
from .share import wire_link
from .text import examples_for, literal, placeholder_for
from .views import MODEL, TRANSLATION, View, ViewContext
from .views.selection import head_choices, layer_choices, valid_head, valid_layer

# Runs in the browser before the open tab is drawn: waits until the live view has drawn the new translation (its
# numbers are inflated asynchronously, static/live_render.js) and the browser has painted it, or a second at most,
# so that the tab's plots never hold the main thread while the translation and the live picture wait.
AFTER_LIVE_VIEW_JS = """(...args) => new Promise(done => {
  const started = performance.now();
  const wait = () => {
    const pending = document.querySelector('#live-attention .ae-live[data-pending]');
    if (pending && performance.now() - started < 1000) return requestAnimationFrame(wait);
    requestAnimationFrame(() => setTimeout(() => done(args), 0));
  };
  wait();
})"""


TRANSLATE_SHARED_OUTPUTS = ("translation", "summary", "language_offer", "sentence", "layer", "head")  # and the views'


class Wiring:
    """Components by name, the result state, and the view state: what views use to wire their events."""

    def __init__(self, registry: Registry, views: list[View]):
        self.registry, self.views = registry, views
        self.service = ModelService(registry)  # the views' one way into the model
        self.components: dict[str, gr.components.Component] = {}
        self.view_outputs: dict[str, list[str]] = {}
        self.result_state: gr.State | None = None
        self.open_tab: gr.State | None = None  # the tab the visitor has open: drawn at once on Translate
        self.tabs: dict[str, gr.Tab] = {}
        self.state_names: list[str] = []

    def add(self, named: dict, owner: str | None = None) -> None:
        clash = sorted(set(named) & set(self.components))
        if clash:
            raise ValueError(f"component names {clash} are used twice; view {owner!r} must choose others")
        self.components.update(named)
        if owner:  # a view's buttons start its own events; everything else may be rendered
            self.view_outputs[owner] = [name for name, c in named.items() if not isinstance(c, gr.Button)]

    @property
    def state_inputs(self) -> list:
        """[result state, every view-state control]: the inputs of every re-rendering handler."""
        return [self.result_state] + [self.components[name] for name in self.state_names]

    def state_from(self, values) -> dict:
        return dict(zip(self.state_names, values))

    @property
    def quiet(self) -> dict:
        """An event's arguments for no progress animation, with its loading status kept on the footer alone. Gradio's
        page re-reads (snapshots) the value of every component that has ever had a loading status at each status
        change of any event; an event listing ~100 outputs, as the page's load does, made each later Translate spend
        tens of milliseconds in the browser copying plots it was not changing."""
        return {"show_progress": "hidden", "show_progress_on": [self.components["footer"]]}

    def by_component(self, named: dict) -> dict:
        return {self.components[name]: value for name, value in named.items()}

    def outputs_of(self, view: View) -> list:
        return [self.components[name] for name in self.view_outputs[view.name]]

    def context(self, model_key: str) -> ViewContext:
        return ViewContext(model_key, {key: m.profile for key, m in self.registry.models.items()})

    @property
    def request_names(self) -> list[str]:
        """The page's request controls by component name (Request.from_page reads them): every strategy's
        settings are there, each under its namespaced key."""
        return (["source", "model", "device", "strategy"] + [s.key for s in all_settings()]
                + ["max_length", "prefix", "heads_off"])

    def request_values(self, values) -> dict:
        return dict(zip(self.request_names, values))

    @property
    def translate_output_names(self) -> list[str]:
        """What a translation updates after the (hidden) result state: the shared outputs, then every view's."""
        return list(TRANSLATE_SHARED_OUTPUTS) + [
            name for view in self.views for name in self.view_outputs[view.name]]

    def translate(self, request: Request | Callable[[], Request], only: set[str] | None = None, **state) -> dict:
        """Runs a request (or builds it first: a bad value then becomes the visitor's message) and renders every
        view (or those named in `only`) in the view state given by name; what is not given takes its control's
        default. Returns values by name, with the stored result under "result"."""
        unknown = sorted(set(state) - set(self.state_names))
        if unknown:
            raise TypeError(f"unknown view state {unknown}; the view state is {self.state_names}")
        state = self.default_state() | state
        result = run_request(self.service, request if callable(request) else lambda: request)
        n_layers, n_heads = result.translations[0].recorded["cross"].values.shape[:2]
        state.update(sentence=0, layer=valid_layer(state["layer"], n_layers), head=valid_head(state["head"], n_heads))
        named = {
            "result": result, "translation": "\n".join(t.text for t in result.translations), "summary": summary(result),
            "language_offer": offer_update(result),
            "sentence": gr.update(choices=[(f"{i + 1}: {t.text[:60] or '(empty)'}", i)
                                           for i, t in enumerate(result.translations)], value=0),
            "layer": gr.update(choices=layer_choices(n_layers), value=state["layer"]),
            "head": gr.update(choices=head_choices(n_heads), value=state["head"]),
        }
        for view in self.views:
            if only is None or view.name in only:
                named.update(view.render(result, state, self.context(result.model_key), TRANSLATION))
                result.rendered_views.add(view.name)
        return named

    def default_state(self) -> dict:
        return {name: self.components[name].value for name in self.state_names}

    def view(self, name: str) -> View:
        return next(v for v in self.views if v.name == name)

    def render_named(self, views, result, state: dict, model_key: str, changed: str) -> dict:
        named = {}
        for view in views:
            named.update(view.render(result, state, self.context(model_key), changed))
        return named

    def render(self, views, result, state: dict, model_key: str, changed: str) -> dict:
        return self.unchanged_if_empty(self.by_component(self.render_named(views, result, state, model_key, changed)))

    def unchanged_if_empty(self, updates: dict) -> dict:
        """Gradio reads an empty dict as one output value: say "nothing changes" with one component instead."""
        return updates or {self.components["summary"]: gr.update()}


def wire(ui: Wiring, demo: gr.Blocks) -> None:
    c, views = ui.components, ui.views
    view_outputs = [component for view in views for component in ui.outputs_of(view)]

    def translate_page(*values):
        """The page's Translate: the translation and the first screen first; the open tab right after
        (draw_open_tab), other tabs when opened (wire_tab), so the picture never waits for hidden plots."""
        request, state = ui.request_values(values), ui.state_from(values[len(ui.request_names):])
        shown = {v.name for v in views if v.placement == "first_screen"}
        named = ui.translate(lambda: Request.from_page(ui.registry, request), only=shown, **state)
        return {ui.result_state: named.pop("result")} | ui.by_component(named)

    def draw_open_tab(result, *values):
        *values, open_tab = values
        view = next((v for v in views if v.name == open_tab), None)
        if result is None or view is None or view.name in result.rendered_views:
            return {ui.result_state: gr.update()}
        result.rendered_views.add(view.name)
        named = view.render(result, ui.state_from(values), ui.context(result.model_key), TRANSLATION)
        return {ui.result_state: result} | ui.by_component(named)

    translate_inputs = [c[name] for name in ui.request_names + ui.state_names]
    # the page's Translate returns the first screen alone (the open tab follows in draw_open_tab, other tabs when
    # opened), so only those are its outputs: Gradio handles every listed output on the server and in the browser
    first_screen_outputs = {
        name for view in views if view.placement == "first_screen" for name in ui.view_outputs[view.name]
    }
    translate_outputs = [ui.result_state] + [c[name] for name in ui.translate_output_names
                                             if name in first_screen_outputs or name in TRANSLATE_SHARED_OUTPUTS]

    def validate(*values):
        """Runs before the translation: a bad request gets its message on the input at fault, and the last good
        result stays as it was (no output is touched)."""
        checks = [gr.validate(True, "") for _ in values]
        try:
            Request.from_page(ui.registry, ui.request_values(values))
        except RequestError as error:
            field = "source" if error.field == "text" else error.field  # the text is typed into "source"
            checks[ui.request_names.index(field) if field in ui.request_names else 0] = gr.validate(False, str(error))
        return checks

    tab_outputs = [component for view in views if view.placement == "tab" for component in ui.outputs_of(view)]
    # the progress animation runs on the translation box alone: animating every output kept the browser busy while
    # the server translated, on the same cores (docs/speed.md);
    # the live picture keeps the last translation's until the new one is drawn
    for trigger in (c["translate_button"].click, c["source"].submit):  # the page: checked first, result kept
        trigger(
            translate_page,
            translate_inputs,
            translate_outputs,
            api_name=False,
            api_visibility="private",
            validator=validate,
            show_progress_on=[c["translation"]],
        ).success(
            draw_open_tab,
            ui.state_inputs + [ui.open_tab],
            [ui.result_state] + tab_outputs,
            api_visibility="private",
            js=AFTER_LIVE_VIEW_JS,
            **ui.quiet,
        )
    wire_api(ui, demo)

    # a control re-renders the views that read it, from the stored result: no model runs, so no queue
    for name in ui.state_names:
        readers = [v for v in views if name in v.reads or name in v.controls]
        if not readers:
            continue

        def rerender(result, *values, changed=name, readers=readers):
            return ui.render(readers, result, ui.state_from(values[:-1]), values[-1], changed)

        c[name].input(rerender, ui.state_inputs + [c["model"]],
                      [comp for v in readers for comp in ui.outputs_of(v)], api_visibility="private", queue=False)

    def on_model(result, *values):
        """One request per model choice: the views about the model, its examples, and a stale result marked."""
        model_key = values[-1]
        return ui.render(views, result, ui.state_from(values[:-1]), model_key, MODEL) | model_inputs(
            ui, model_key, result
        )

    for event in (c["model"].change, demo.load):
        event(on_model, ui.state_inputs + [c["model"]], view_outputs + [c["example"], c["source"], c["summary"]],
              api_visibility="private", **ui.quiet)
    for view in views:
        view.wire(ui)
        if view.placement == "tab":
            wire_tab(ui, view)
        for button, target in view.jumps.items():
            served = next((v for v in views if v.name == target), None)
            if served is not None:
                wire_jump(ui, c[button], served)
    wire_controls(ui)
    wire_language_offer(ui)
    wire_link(ui, demo)
    demo.load(lambda: decoding_path(ui.service.pool, ui.registry), None, c["footer"], api_visibility="private",
              queue=False, **ui.quiet)
    demo.load(None, None, None, js=PLOT_SVG_JS)
    demo.load(None, None, None, js=glossary_marks_js())


def wire_tab(ui: Wiring, view: View) -> None:
    """Opening a tab draws its view for the current result, if the Translate that made it did not."""

    def opened(result, *values):
        out = {ui.open_tab: view.name}
        if result is None or view.name in result.rendered_views:
            return out
        result.rendered_views.add(view.name)
        named = view.render(result, ui.state_from(values), ui.context(result.model_key), TRANSLATION)
        return out | ui.by_component(named) | {ui.result_state: result}

    ui.tabs[view.name].select(opened, ui.state_inputs, [ui.open_tab, ui.result_state] + ui.outputs_of(view),
                              api_visibility="private", **ui.quiet)


def wire_jump(ui: Wiring, button, target: View) -> None:
    """A declared jump (View.jumps): the button opens `target`'s tab at the current decoding step."""

    def jump(result, *values):
        state = ui.state_from(values)
        named = target.at_step(ui, result, state, int(state.get("step") or 1))
        return ui.by_component(named or {}) | {ui.components["tabs"]: gr.Tabs(selected=target.name)}

    button.click(jump, ui.state_inputs, ui.outputs_of(target) + [ui.components["tabs"]], api_visibility="private")


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
    c["example"].input(lambda sentence: sentence, c["example"], c["source"], api_visibility="private", queue=False)

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
        return {c["strategy"]: strategy} | {c[name]: value for name, value in values.items()}

    c["model"].input(on_model_input, c["model"], [c["strategy"]] + [c[spec.key] for spec in specs],
                     api_visibility="private", queue=False)
    c["strategy"].change(on_strategy, c["strategy"], [c[spec.key] for spec in specs] + [c["new_seed"]],
                         api_visibility="private",
                         queue=False)
