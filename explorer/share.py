"""Shareable links: the query string holds the request and the view, numbered from 1 as the page numbers
them, e.g. ?text=A+dog+runs.&model=en-de&strategy=beam&beam_size=4&kind=cross&layer=3&head=2&step=4.
Opening one restores the controls, translates and opens that view; every value is checked and a bad one is
named. The link itself is built in the browser (LINK_JS) from the controls and the live view's state."""
from __future__ import annotations

import json

import gradio as gr

from transformer.core.head_ref import from_shown
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.strategies import all_settings

from .request import Request, RequestError, number
from .text import page_error

VIEW_KEYS = ("kind", "layer", "head", "step")


def parse_link(params: dict, registry) -> tuple[Request, dict]:
    """(the request, the live view to open: kind, 0-based layer, head, step) from a query string. A link holds
    the chosen strategy's settings by name; one of another strategy's (older links held every control) is
    ignored."""
    known = {"text", "model", "device", "strategy", "max_length", "prefix", "heads_off", *VIEW_KEYS,
             *(s.name for s in all_settings())}
    unknown = sorted(set(params) - known - {"__theme", "learn"})  # learn: a playground run (views/learn.py)
    if unknown:
        raise RequestError("link", f"the link has unknown parameters {unknown}; known: {sorted(known)}")
    request = Request.from_link(registry, params)
    config = registry.get(request.model).profile.config
    view = {"kind": params.get("kind", "cross")}
    if view["kind"] not in ATTENTION_KINDS:
        raise RequestError("kind", f"kind in the link must be one of {list(ATTENTION_KINDS)}, got {view['kind']!r}")
    stack = config.stack_of(view["kind"])  # the kind's own stack: the encoder's and the decoder's may differ
    view["layer"] = from_shown(in_range("layer", params.get("layer", str(stack.layers)), 1, stack.layers))
    head = params.get("head", "mean")
    view["head"] = "mean" if head == "mean" else from_shown(in_range("head", head, 1, stack.heads))
    view["step"] = in_range("step", params["step"], 1, 10_000) if "step" in params else None
    return request, view


def in_range(name: str, text: str, low: int, high: int) -> int:
    return number(name, text, int, low, high)


def wire_link(ui, demo: gr.Blocks) -> None:
    """A link that restores this state: built in the browser on demand; opened, it translates and opens the view."""
    c = ui.components
    specs = {spec.key: spec for spec in all_settings()}
    # per request control: its name in the link, and the strategy it belongs to (a setting) or null
    link_names = [["text" if name == "source" else specs[name].name if name in specs else name,
                   specs[name].strategy if name in specs else None] for name in ui.request_names]
    request_inputs = [c[name] for name in ui.request_names]
    c["copy_link"].click(None, request_inputs, c["link"], js=LINK_JS % json.dumps(link_names), api_visibility="private")
    restored = [name for name in ui.request_names if name != "device"]

    def open_link(http: gr.Request):
        params = dict(http.query_params) if http else {}
        if "text" not in params:
            return {c["source"]: gr.update()}
        try:
            request, view = parse_link(params, ui.registry)
        except RequestError as error:
            raise page_error(str(error)) from error
        # the first screen and the tab a page opens on; the other tabs draw when opened, as after a Translate
        named = ui.translate(request, only=ui.first_screen | {ui.open_tab.value})
        if isinstance(named.get("live_attention"), dict):
            named["live_attention"]["start"] = {**view, "restore": True}
        values = {name: value for name, value in request.page_values().items() if name in restored}
        return ({ui.result_state: named.pop("result")} | ui.by_component(named)
                | {c[name]: gr.update(value=value) for name, value in values.items()})

    outputs = [ui.result_state] + [c[name] for name in ui.translate_output_names] + [c[name] for name in restored]
    demo.load(open_link, None, outputs, api_visibility="private", **ui.quiet)


# Runs in the browser with the request controls' values: the link to this state, also put in the address bar.
LINK_JS = """
(...values) => {
  const names = %s;  // [name in the link, strategy of a setting or null], one per request control
  const strategy = values[names.findIndex(([name]) => name === 'strategy')];
  const params = new URLSearchParams();
  names.forEach(([name, owner], i) => {
    const v = values[i];
    if (v !== null && v !== undefined && v !== "" && (owner === null || owner === strategy)) params.set(name, v);
  });
  const live = document.querySelector('#live-attention .ae-live');
  const view = live && live.dataset.link ? JSON.parse(live.dataset.link) : null;  // numbered from 1 already
  if (view) {
    params.set('kind', view.kind);
    if (view.layer !== null) params.set('layer', view.layer);
    params.set('head', view.head);
    if (view.step) params.set('step', view.step);
  }
  const link = window.location.origin + window.location.pathname + '?' + params.toString();
  window.history.replaceState(null, '', link);
  if (navigator.clipboard) navigator.clipboard.writeText(link).catch(() => {});
  return link;
}
"""
