"""The page around the views: input, decoding controls, the translation, the shared sentence / layer /
head controls, one tab per view, and the wiring that re-renders exactly the views a control affects.

Handlers return dicts keyed by component; views return dicts keyed by name (`Wiring.by_component` maps).
"""
from __future__ import annotations

import inspect
import json
import logging
import random
from pathlib import Path

import gradio as gr
import torch

from transformer.decoding.export import to_json
from transformer.decoding.strategies import all_settings

from . import controls
from .components import Dropdown, Radio
from .heads_off import format_heads_off
from .registry import Registry
from .request import Request, RequestError
from .session import ModelService, RunResult
from .share import LINK_JS, parse_link
from .text import literal
from .views import MODEL, TRANSLATION, VIEWS, View, ViewContext
from .views.selection import head_choices, layer_choices, valid_head, valid_layer

STATIC = Path(__file__).resolve().parent / "static"
CSS = (STATIC / "style.css").read_text(encoding="utf-8")
log = logging.getLogger("attention-explorer")


def examples_for(language: str | None) -> list[str]:
    path = STATIC / f"examples.{language}.txt"
    if not path.is_file():
        path = STATIC / "examples.en.txt"
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def summary(result: RunResult) -> str:
    described = ", ".join(f"{name.replace('_', ' ')} {literal(str(value))}" for name, value in result.settings.items()
                          if name not in ("max_length", "prefix", "heads_off"))
    if result.settings.get("heads_off"):
        described += f"{', ' if described else ''}heads off: {literal(format_heads_off(result.settings['heads_off']))}"
    if result.settings.get("prefix"):
        described += f"{', ' if described else ''}forced start “{literal(str(result.settings['prefix']))}”"
    lines = [f"**{len(result.translations)} sentence(s)** translated in **{result.milliseconds:.0f} ms** on "
             f"{result.device.upper()} with {result.strategy_label}{f' ({described})' if described else ''}, "
             "attention captured."]
    lines += [f"⚠️ {literal(n)}" for n in result.notices]
    return "\n\n".join(lines)


def details_json(result: RunResult) -> dict:
    """Everything behind the plots, for API callers."""
    return {"model": result.model_key, "device": result.device, "strategy": result.strategy, "settings": result.settings,
            "milliseconds": round(result.milliseconds, 1), "notices": result.notices,
            **json.loads(to_json(result.translations))}


# Runs in the browser before the open tab is drawn: waits until the first screen has been painted, so that
# the tab's plots never hold back the translation and the live picture.
AFTER_PAINT_JS = "(...args) => new Promise(done => requestAnimationFrame(() => setTimeout(() => done(args), 0)))"


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

    def by_component(self, named: dict) -> dict:
        return {self.components[name]: value for name, value in named.items()}

    def outputs_of(self, view: View) -> list:
        return [self.components[name] for name in self.view_outputs[view.name]]

    def context(self, model_key: str) -> ViewContext:
        return ViewContext(model_key, {key: m.profile for key, m in self.registry.models.items()})

    @property
    def request_names(self) -> list[str]:
        """The inputs of a translation request, in the API's order."""
        return (["source", "model", "device", "strategy"] + [s.name for s in all_settings()]
                + ["max_length", "prefix", "heads_off"])

    @property
    def translate_output_names(self) -> list[str]:
        """What /translate returns after the (hidden) result state, in order."""
        return ["translation", "summary", "sentence", "layer", "head"] + [
            name for view in self.views for name in self.view_outputs[view.name]]

    def translate(self, text, *request, only: set[str] | None = None, **named) -> dict:
        """Runs a request (the API's arguments after the text, in order or by name) and renders every view
        (or those named in `only`) in the view state given by name; what is not given takes its control's
        default. Returns values by name, with the stored result under "result"."""
        given = dict(zip(self.request_names[1:], request)) | named
        unknown = sorted(set(given) - set(self.request_names) - set(self.state_names))
        if unknown:
            raise TypeError(f"unknown arguments {unknown}")
        request = [given.get(name, self.components[name].value) for name in self.request_names[1:]]
        state = {name: given.get(name, default) for name, default in self.default_state().items()}
        result = run_request(self.registry, text, *request)
        n_layers, n_heads = result.translations[0].recorded["cross"].values.shape[:2]
        state.update(sentence=0, layer=valid_layer(state["layer"], n_layers), head=valid_head(state["head"], n_heads))
        named = {
            "result": result, "translation": "\n".join(t.text for t in result.translations), "summary": summary(result),
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


def build_demo(registry: Registry, views: list[View] | None = None) -> tuple[gr.Blocks, Wiring]:
    views = VIEWS if views is None else views
    ui = Wiring(registry, views)
    default = registry.get(registry.default_key)
    config = default.profile.config
    devices = [("CPU", "cpu"), ("CUDA" if torch.cuda.is_available() else "CUDA (not available here: falls back to CPU)", "cuda")]
    # Gradio's copies of exported files: removed after an hour, checked every hour
    with gr.Blocks(title="Attention Explorer", delete_cache=(3600, 3600)) as demo:
        ui.result_state = gr.State(None)
        if registry.problems:
            gr.Markdown("⚠️ Skipped checkpoint(s): " + "; ".join(f"**{literal(name)}**: {literal(why)}"
                                                             for name, why in registry.problems.items()), elem_id="problems")
        gr.Markdown("## Attention Explorer · a Transformer trained from scratch translates; look inside it",
                    elem_id="title")
        context = ui.context(registry.default_key)
        with gr.Row(equal_height=False):
            with gr.Column(scale=4, min_width=320):
                source = gr.Textbox(label="Source text", lines=2, elem_id="source",
                                    placeholder="One sentence per line, e.g. A man is riding a bicycle.")
                with gr.Row():
                    model_choice = Dropdown(registry.choices, value=registry.default_key, label="Model", elem_id="model",
                                            scale=3)
                    translate_button = gr.Button("Translate", variant="primary", elem_id="translate-button", scale=2)
                example = gr.Dropdown(examples_for(registry.source_language(registry.default_key)), value=None,
                                      label="Example sentences (image captions, like the training data)",
                                      elem_id="example")
                translation = gr.Textbox(label="Translation", interactive=False, elem_id="translation", lines=2)
                summary_text = gr.Markdown(elem_id="summary")
                with gr.Row():
                    copy_link = gr.Button("Copy link to this view", size="sm", elem_id="copy-link", scale=1)
                    link = gr.Textbox(show_label=False, interactive=False, elem_id="link", scale=3, max_lines=1,
                                      placeholder="the link appears here")
                with gr.Accordion("Decoding settings", open=False):
                    device_choice = Radio(devices, value="cpu", label="Device", elem_id="device")
                    strategy = controls.strategy_radio()
                    settings = controls.setting_inputs()
                    new_seed = gr.Button("New seed, run again", size="sm", elem_id="new-seed",
                                         visible="seed" in settings and settings["seed"].visible)
                    max_length = controls.max_length_slider()
                    prefix = controls.prefix_box()
                    heads_off = controls.heads_off_box()
            with gr.Column(scale=5, min_width=320):
                for view in views:
                    if view.placement == "first_screen":
                        ui.add(view.build(context), owner=view.name)
        with gr.Row():
            sentence = gr.Dropdown([], label="Sentence", elem_id="sentence")
            layer = gr.Dropdown(layer_choices(config.n_layers), value=str(config.n_layers - 1), label="Layer", elem_id="layer")
            head = gr.Dropdown(head_choices(config.n_heads), value="mean", label="Head", elem_id="head")
        ui.add({"source": source, "translate_button": translate_button, "model": model_choice, "device": device_choice,
                "example": example, "new_seed": new_seed, "copy_link": copy_link, "link": link, "strategy": strategy, **settings, "max_length": max_length, "prefix": prefix, "heads_off": heads_off,
                "translation": translation, "summary": summary_text, "sentence": sentence, "layer": layer, "head": head})
        with gr.Tabs() as tabs:
            ui.add({"tabs": tabs})
            for view in views:
                if view.placement == "tab":
                    with gr.Tab(view.title, id=view.name) as tab:
                        ui.add(view.build(context), owner=view.name)
                    ui.tabs[view.name] = tab
        ui.open_tab = gr.State(next((v.name for v in views if v.placement == "tab"), ""))
        ui.state_names = ["sentence", "layer", "head"] + [name for view in views for name in view.controls]
        wire(ui, demo)
    return demo, ui


def wire(ui: Wiring, demo: gr.Blocks) -> None:
    c, views = ui.components, ui.views
    view_outputs = [component for view in views for component in ui.outputs_of(view)]

    def translate(*values):
        """Translate each line; returns the translation first, then everything the views draw (in the view
        state the visitor has chosen)."""
        request, state = values[: len(ui.request_names)], values[len(ui.request_names):]
        named = ui.translate(*request, **ui.state_from(state))
        return {ui.result_state: named.pop("result")} | ui.by_component(named)

    def translate_page(*values):
        """The page's Translate: the translation and the first screen first; the open tab right after
        (draw_open_tab), other tabs when opened (wire_tab), so the picture never waits for hidden plots."""
        request, state = values[: len(ui.request_names)], values[len(ui.request_names):]
        shown = {v.name for v in views if v.placement == "first_screen"}
        named = ui.translate(*request, only=shown, **ui.state_from(state))
        return {ui.result_state: named.pop("result")} | ui.by_component(named)

    def draw_open_tab(result, *values):
        *values, open_tab = values
        view = next((v for v in views if v.name == open_tab), None)
        if result is None or view is None or view.name in result.rendered_views:
            return {ui.result_state: gr.update()}
        result.rendered_views.add(view.name)
        named = view.render(result, ui.state_from(values), ui.context(result.model_key), TRANSLATION)
        return {ui.result_state: result} | ui.by_component(named)

    translate.__signature__ = inspect.Signature(
        controls.request_parameters(ui.registry.default_key)
        + [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for name in ui.state_names])
    translate_inputs = [c[name] for name in ui.request_names + ui.state_names]
    translate_outputs = [ui.result_state] + [c[name] for name in ui.translate_output_names]
    def validate(*values):
        """Runs before the translation: a bad request gets its message on the input at fault, and the last good
        result stays as it was (no output is touched)."""
        checks = [gr.validate(True, "") for _ in values]
        try:
            request_from(ui.registry, values[: len(ui.request_names)])
        except RequestError as error:
            at_fault = ui.request_names.index(input_of(error.field)) if input_of(error.field) in ui.request_names else 0
            checks[at_fault] = gr.validate(False, str(error))
        return checks

    tab_outputs = [component for view in views if view.placement == "tab" for component in ui.outputs_of(view)]
    for trigger in (c["translate_button"].click, c["source"].submit):  # the page: checked first, result kept
        trigger(translate_page, translate_inputs, translate_outputs, api_name=False, api_visibility="private",
                validator=validate).success(draw_open_tab, ui.state_inputs + [ui.open_tab], [ui.result_state] + tab_outputs,
                                            api_visibility="private", show_progress="hidden", js=AFTER_PAINT_JS)
    # the API: the same handler, unvalidated, so an API caller gets the error message itself
    api_trigger = gr.Button(visible="hidden", elem_id="api-translate")
    api_trigger.click(translate, translate_inputs, translate_outputs, api_name="translate")

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
        return ui.render(views, result, ui.state_from(values[:-1]), model_key, MODEL) | model_inputs(ui, model_key, result)

    for event in (c["model"].change, demo.load):
        event(on_model, ui.state_inputs + [c["model"]], view_outputs + [c["example"], c["summary"]],
              api_visibility="private", show_progress="hidden")
    for view in views:
        view.wire(ui)
        if view.placement == "tab":
            wire_tab(ui, view)
    wire_controls(ui)
    wire_link(ui, demo)

    def translate_details(*values) -> dict:
        """Translate and return every number behind the plots: tokens, ids, steps with top-k candidates, the
        search tree, and attention weights [layer][head][query][key] for encoder_self, decoder_self and cross."""
        return details_json(run_request(ui.registry, *values))

    translate_details.__signature__ = inspect.Signature(controls.request_parameters(ui.registry.default_key),
                                                        return_annotation=dict)
    translate_details.__annotations__ = {p.name: p.annotation for p in translate_details.__signature__.parameters.values()}
    translate_details.__annotations__["return"] = dict
    gr.api(translate_details, api_name="translate_details")


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
                              api_visibility="private", show_progress="hidden")


def model_inputs(ui: Wiring, model_key: str, result) -> dict:
    """The examples in the model's source language, and a note when the shown result is another model's."""
    c = ui.components
    stale = result is not None and result.model_key != model_key
    note = (f"⚠️ The result below is from **{literal(ui.registry.get(result.model_key).label)}**; press Translate "
            f"to translate with **{literal(ui.registry.get(model_key).label)}**." if stale else gr.update())
    return {c["example"]: gr.update(choices=examples_for(ui.registry.source_language(model_key)), value=None),
            c["summary"]: note}


def wire_controls(ui: Wiring) -> None:
    """The input side: examples, the model's language, which settings show, and a result gone stale."""
    c = ui.components
    c["example"].input(lambda sentence: sentence, c["example"], c["source"], api_visibility="private", queue=False)

    specs = all_settings()
    if "seed" in c:  # sampling: the same seed gives the same output, so offer a new one
        c["new_seed"].click(lambda: random.randrange(2**31 - 1), None, c["seed"], api_visibility="private",
                            queue=False).then(None, None, None, js="() => document.querySelector('#translate-button')"
                                              ".click()")

    def on_strategy(strategy):  # only the chosen strategy's settings are shown
        shown = {c[spec.name]: gr.update(visible=spec.strategy == strategy) for spec in specs}
        return shown | {c["new_seed"]: gr.update(visible=strategy == "sample")}

    c["strategy"].change(on_strategy, c["strategy"], [c[spec.name] for spec in specs] + [c["new_seed"]],
                         api_visibility="private",
                         queue=False)


def wire_link(ui: Wiring, demo: gr.Blocks) -> None:
    """A link that restores this state: built in the browser on demand; opened, it translates and opens the view."""
    c = ui.components
    api_names = ["text"] + ui.request_names[1:]
    request_inputs = [c[name] for name in ui.request_names]
    c["copy_link"].click(None, request_inputs, c["link"], js=LINK_JS % json.dumps(api_names), api_visibility="private")
    restored = ["source", "model", "strategy", *(s.name for s in all_settings()), "max_length", "prefix", "heads_off"]

    def open_link(http: gr.Request):
        params = dict(http.query_params) if http else {}
        if "text" not in params:
            return {c["source"]: gr.update()}
        try:
            request, view = parse_link(params, ui.registry)
        except RequestError as error:
            raise gr.Error(str(error)) from error
        arguments = request.api_arguments()
        named = ui.translate(request.text, **arguments)
        if isinstance(named.get("live_attention"), dict):
            named["live_attention"]["start"] = {**view, "restore": True}
        values = {"source": params["text"], **{k: v for k, v in arguments.items() if k in restored}}
        return ({ui.result_state: named.pop("result")} | ui.by_component(named)
                | {c[name]: gr.update(value=value) for name, value in values.items()})

    outputs = [ui.result_state] + [c[name] for name in ui.translate_output_names] + [c[name] for name in restored]
    demo.load(open_link, None, outputs, api_visibility="private", show_progress="hidden")


def input_of(field: str) -> str:
    """The page's input for a request field (the text is typed into "source"; the rest share their names)."""
    return "source" if field == "text" else field


def request_from(registry: Registry, values) -> Request:
    """A Request from the API's arguments in order (see controls.request_parameters)."""
    text, model_key, device, strategy, *rest = values
    *setting_values, max_length, prefix, heads_off = rest
    settings = dict(zip([s.name for s in all_settings()], setting_values))
    return Request.build(registry, text, model_key, device, strategy, settings, max_length, prefix, heads_off)


def run_request(registry: Registry, *values) -> RunResult:
    """Runs one request given as the API's arguments (see controls.request_parameters); errors become
    messages for the visitor."""
    try:
        result = ModelService(registry).run(request_from(registry, values))
    except RequestError as error:
        raise gr.Error(str(error)) from error
    except Exception as error:  # one visitor's failure must not take the server down
        log.exception("translation failed")
        raise gr.Error(f"Translation failed: {type(error).__name__}. Try a shorter or different input.") from error
    for notice in result.notices:
        gr.Warning(notice)
    return result
