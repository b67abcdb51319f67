"""Shareable links: the query string holds the request and the view, numbered from 1 as the page numbers
them, e.g. ?text=A+dog+runs.&model=en-de&strategy=beam&beam_size=4&kind=cross&layer=3&head=2&step=4.
Opening one restores the controls, translates and opens that view; every value is checked and a bad one is
named. The link itself is built in the browser (LINK_JS) from the controls and the live view's state."""
from __future__ import annotations

import json

import gradio as gr

from transformer.core.head_ref import from_shown
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.strategies import STRATEGIES, all_settings

from .request import Request, RequestError, number

VIEW_KEYS = ("kind", "layer", "head", "step")


def parse_link(params: dict, registry) -> tuple[Request, dict]:
    """(the request, the live view to open: kind, 0-based layer, head, step) from a query string."""
    known = {"text", "model", "device", "strategy", "max_length", "prefix", "heads_off", *VIEW_KEYS,
             *(s.name for s in all_settings())}
    unknown = sorted(set(params) - known - {"__theme"})
    if unknown:
        raise RequestError("link", f"the link has unknown parameters {unknown}; known: {sorted(known)}")
    if params.get("model", registry.default_key) not in registry.models:
        raise RequestError("model", f"model in the link must be one of {sorted(registry.models)}, "
                                    f"got {params['model']!r}")
    if params.get("strategy", next(iter(STRATEGIES))) not in STRATEGIES:
        raise RequestError("strategy", f"strategy in the link must be one of {list(STRATEGIES)}, "
                                       f"got {params['strategy']!r}")
    request = Request.from_link(registry, params)
    config = registry.get(request.model).profile.config
    view = {"kind": params.get("kind", "cross")}
    if view["kind"] not in ATTENTION_KINDS:
        raise RequestError("kind", f"kind in the link must be one of {list(ATTENTION_KINDS)}, got {view['kind']!r}")
    view["layer"] = from_shown(in_range("layer", params.get("layer", str(config.n_layers)), 1, config.n_layers))
    head = params.get("head", "mean")
    view["head"] = "mean" if head == "mean" else from_shown(in_range("head", head, 1, config.n_heads))
    view["step"] = in_range("step", params["step"], 1, 10_000) if "step" in params else None
    return request, view


def in_range(name: str, text: str, low: int, high: int) -> int:
    value = number(name, text, int)
    if not low <= value <= high:
        raise RequestError(name, f"{name} in the link must be in [{low}, {high}], got {value}")
    return value


def wire_link(ui, demo: gr.Blocks) -> None:
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


# Runs in the browser with the request controls' values: the link to this state, also put in the address bar.
LINK_JS = """
(...values) => {
  const names = %s;
  const params = new URLSearchParams();
  names.forEach((name, i) => { const v = values[i]; if (v !== null && v !== undefined && v !== "") params.set(name, v); });
  const live = document.querySelector('#live-attention .ae-live');
  const view = live && live.dataset.state ? JSON.parse(live.dataset.state) : null;
  if (view) {
    params.set('kind', view.kind);
    if (view.layer !== 'overview') params.set('layer', view.layer + 1);
    params.set('head', view.head === 'mean' ? 'mean' : view.head + 1);
    if (view.step) params.set('step', view.step);
  }
  const link = window.location.origin + window.location.pathname + '?' + params.toString();
  window.history.replaceState(null, '', link);
  if (navigator.clipboard) navigator.clipboard.writeText(link).catch(() => {});
  return link;
}
"""
