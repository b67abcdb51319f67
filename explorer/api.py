"""The app's API: /translate (the page's handler, unvalidated, so an API caller gets the error message itself)
and /translate_details (every number behind the plots); both take the request's arguments (controls.py)."""
from __future__ import annotations

import inspect
import json
import logging

import gradio as gr

from transformer.decoding.export import to_json
from transformer.decoding.strategies import all_settings

from . import controls
from .heads_off import format_heads_off
from .registry import Registry
from .request import Request, RequestError
from .session import ModelService, RunResult
from .text import literal

log = logging.getLogger("attention-explorer")


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


def wire_api(ui, translate_inputs: list, translate_outputs: list) -> None:
    """Registers both endpoints on the page being built; `ui` is the page's Wiring."""

    def translate(*values):
        """Translate each line; returns the translation first, then everything the views draw (in the view
        state the visitor has chosen)."""
        request, state = values[: len(ui.request_names)], values[len(ui.request_names):]
        named = ui.translate(*request, **ui.state_from(state))
        return {ui.result_state: named.pop("result")} | ui.by_component(named)

    translate.__signature__ = inspect.Signature(
        controls.request_parameters(ui.registry.default_key)
        + [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for name in ui.state_names])
    api_trigger = gr.Button(visible="hidden", elem_id="api-translate")
    api_trigger.click(translate, translate_inputs, translate_outputs, api_name="translate")

    def translate_details(*values) -> dict:
        """Translate and return every number behind the plots: tokens, ids, steps with top-k candidates, the
        search tree, and attention weights [layer][head][query][key] for encoder_self, decoder_self and cross."""
        return details_json(run_request(ui.registry, *values))

    translate_details.__signature__ = inspect.Signature(controls.request_parameters(ui.registry.default_key),
                                                        return_annotation=dict)
    translate_details.__annotations__ = {p.name: p.annotation for p in translate_details.__signature__.parameters.values()}
    translate_details.__annotations__["return"] = dict
    gr.api(translate_details, api_name="translate_details")


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
