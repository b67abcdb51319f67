"""Shareable links: the query string holds the request and the view, numbered from 1 as the page numbers
them, e.g. ?text=A+dog+runs.&model=en-de&strategy=beam&beam_size=4&kind=cross&layer=3&head=2&step=4.
Opening one restores the controls (the Cause tab's inputs too: cause_corrupted, cause_target, cause_contrast; and
the Features tab's: features_point, features_latent, features_scale, which open that tab), translates and opens that
view; every value is checked and a bad one is named. The link itself is built in the
browser (LINK_JS) from the controls and the live view's state."""
from __future__ import annotations

import json

import gradio as gr

from transformer.core.head_ref import from_shown
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.strategies import all_settings
from transformer.features.steering import MAX_SCALE

from .features_api import folders, load_config
from .request import MAX_CHARACTERS, MAX_OUTPUT_TOKENS, Request, RequestError, check_unicode, number, split_lines
from .text import page_error

VIEW_KEYS = ("kind", "layer", "head", "step")
CAUSE_KEYS = ("cause_corrupted", "cause_target", "cause_contrast")  # the Cause tab's inputs
FEATURE_KEYS = ("features_point", "features_latent", "features_scale")  # the Features tab's (views/features.py)


def parse_link(params: dict, registry) -> tuple[Request, dict]:
    """(the request, the live view to open: kind, 0-based layer, head, step) from a query string. A link holds
    the chosen strategy's settings by name; one of another strategy's (older links held every control) is
    ignored."""
    known = {"text", "model", "device", "strategy", "max_length", "prefix", "heads_off", *VIEW_KEYS, *CAUSE_KEYS,
             *FEATURE_KEYS, *(s.name for s in all_settings())}
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
    if any(key in params for key in CAUSE_KEYS):
        view["cause"] = cause_of_link(params)
    if any(key in params for key in FEATURE_KEYS):
        view["features"] = features_of_link(params, registry.get(request.model).translator)
    return request, view


def features_of_link(params: dict, translator) -> dict:
    """The Features tab's state from a link: a point the model has a dictionary at, a latent in its range and a
    multiple within ±MAX_SCALE (each optional but the point)."""
    found = folders(translator)
    point = params.get("features_point")
    if point not in found:
        raise RequestError("features_point", f"features_point must be one of {sorted(found)} for this model, got "
                                             f"{point!r}")
    state = {"features_point": point, "features_latent": None, "features_scale": None}
    if "features_latent" in params:
        n = load_config(found[point])["n"]
        state["features_latent"] = in_range("features_latent", params["features_latent"], 0, n - 1)
    if "features_scale" in params:
        state["features_scale"] = number("features_scale", params["features_scale"], float, -MAX_SCALE, MAX_SCALE)
    return state


def cause_of_link(params: dict) -> dict:
    """The Cause tab's inputs from a link: the corrupted sentence (one line, as long as a request's text may be),
    the target piece (from 1; checked against the translation once it is made) and the contrast piece."""
    corrupted, contrast = params.get("cause_corrupted", ""), params.get("cause_contrast", "")
    for name, value in (("cause_corrupted", corrupted), ("cause_contrast", contrast)):
        check_unicode(name, value)
    if len(corrupted) > MAX_CHARACTERS:
        raise RequestError("cause_corrupted", f"cause_corrupted has {len(corrupted):,} characters; the limit is "
                                              f"{MAX_CHARACTERS:,}")
    if len(split_lines(corrupted or "x")) > 1:
        raise RequestError("cause_corrupted", "cause_corrupted must be one sentence on one line")
    target = in_range("cause_target", params.get("cause_target", "1"), 1, MAX_OUTPUT_TOKENS)
    return {"corrupted": corrupted, "target": target, "contrast": contrast}


def checked_cause(cause: dict | None, translation) -> dict:
    """The Cause tab's values for the page, the target checked against the translation the link made."""
    if cause is None:
        return {}
    if cause["target"] > len(translation.tgt_ids):
        raise RequestError("cause_target", f"cause_target must be in [1, {len(translation.tgt_ids)}] for this "
                                           f"translation, got {cause['target']}")
    return {"cause_corrupted": cause["corrupted"], "cause_target": cause["target"], "cause_contrast": cause["contrast"]}


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
            cause, features = view.pop("cause", None), view.pop("features", None) if features_served else None
            # the first screen and the tab a page opens on; the other tabs draw when opened, as after a Translate
            opens = "features" if features else ui.open_tab.value
            named = ui.translate(request, only=ui.first_screen | {opens}, **(features or {}))
            causes = checked_cause(cause, named["result"].translations[0]) if cause_names else {}
        except RequestError as error:
            raise page_error(str(error)) from error
        if isinstance(named.get("live_attention"), dict):
            named["live_attention"]["start"] = {**view, "restore": True}
        values = {name: value for name, value in request.page_values().items() if name in restored} | causes
        opened = {c["tabs"]: gr.Tabs(selected="features"), ui.open_tab: "features"} if features else {}
        return ({ui.result_state: named.pop("result")} | ui.by_component(named) | opened
                | {c[name]: gr.update(value=value) for name, value in (values | (features or {})).items()})

    cause_names = [name for name in CAUSE_KEYS if name in c]
    features_served = "features_point" in c  # its controls are among every view's outputs already
    outputs = ([ui.result_state] + [c[name] for name in ui.translate_output_names]
               + [c[name] for name in restored + cause_names] + ([c["tabs"], ui.open_tab] if features_served else []))
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
  const cause = document.querySelector('#cause-corrupted textarea');  // the Cause tab's inputs, once one is typed
  if (cause && cause.value.trim()) {
    params.set('cause_corrupted', cause.value);
    const target = document.querySelector('#cause-target input');
    if (target && target.value) params.set('cause_target', target.value);
    const contrast = document.querySelector('#cause-contrast textarea, #cause-contrast input');
    if (contrast && contrast.value) params.set('cause_contrast', contrast.value);
  }
  // the Features tab, once a latent is chosen: its box is empty until then (views/features.py)
  const latent = document.querySelector('#features-latent input');
  if (latent && latent.value.trim() !== '') {
    params.set('features_point', document.querySelector('#features-point input').value);
    params.set('features_latent', latent.value);
    const scale = document.querySelector('#features-scale input');
    if (scale && scale.value.trim() !== '') params.set('features_scale', scale.value);
  }
  const link = window.location.origin + window.location.pathname + '?' + params.toString();
  window.history.replaceState(null, '', link);
  if (navigator.clipboard) navigator.clipboard.writeText(link).catch(() => {});
  return link;
}
"""
