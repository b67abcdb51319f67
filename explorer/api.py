"""The app's API: /translate (the translation and its summary), /translate_trace (what the page's live view gets: the
compact trace), /translate_details (every number behind the plots, at full precision) and /walkthrough (every operation
of the forward pass for one source piece and one decoding step). Each takes the request's
named arguments (request.py) and returns a dict; a bad argument's message names it. /server_status says where this
server translates."""
from __future__ import annotations

import inspect
import logging

import gradio as gr

from transformer.core.half_linear import KERNEL
from transformer.core.head_ref import from_shown
from transformer.core.probes import ATTENTION_KINDS
from transformer.numbers import NumberError, checked_number

from .api_json import contrast_json, details_json, trace_json, translation_json
from .batching import Overloaded, busy_message
from .page import python_step_reasons
from .request import DEFAULT_MAX_LENGTH, Request, RequestError, check_unicode, choice
from .session import ALTI, EVERY_ANALYSIS, NORMS, ModelService, RunResult
from .text import page_error, page_warning
from .views.walkthrough_payload import walk_json

log = logging.getLogger("attention-explorer")


def endpoint(ui, respond, analyses: frozenset[str] = EVERY_ANALYSIS):
    """An API endpoint: the request's named arguments in, `respond(result)` (a dict) out. `settings` are the
    chosen strategy's own ({"beam_size": 3}); a strategy or setting left out is the model's recorded decoding.
    `analyses`: what the response reads besides the attention maps (session.run)."""

    def run_endpoint(text: str, model: str = None, device: str = "cpu", strategy: str = None, settings: dict = None,
                     max_length: int = DEFAULT_MAX_LENGTH, prefix: str = None, heads_off: str = None,
                     source_lang: str = None, target_lang: str = None) -> dict:
        return respond(run_request(ui.service, lambda: Request.from_api(
            ui.registry, text, model, device, strategy, settings, max_length, prefix, heads_off,
            source_lang=source_lang, target_lang=target_lang), analyses))

    run_endpoint.__doc__ = respond.__doc__
    return run_endpoint


def counted(name: str, value, high=None, of: str = "") -> int:
    """An API argument counted from 1 (sentence, step, layer, head, query): a finite whole number in [1, high]
    (high None: only its kind and sign are known before translating), else an error naming it, the range as the API
    counts and the value as sent."""
    try:
        return checked_number(name, value, int, 1, high)
    except NumberError as error:
        raise page_error(f"{error}{of} (the API counts {name} from 1)") from None


def api_choice(name: str, value, choices, unknown: str | None = None) -> None:
    """A choice-like API argument (kind, side, model) by the one choice rule: a string among `choices`, else an error
    naming it (a JSON object or list is refused before it is looked up)."""
    try:
        choice(name, value, choices, unknown=unknown)
    except RequestError as error:
        raise page_error(str(error)) from None


def one_translation(ui, sentence, text, model, device, strategy, settings, max_length, prefix, heads_off,
                    text_field: str = "text"):
    """(result, its translation of line `sentence`, from 1) for the endpoints that explain one sentence; `text_field`:
    the text's name among the endpoint's arguments, for its errors."""
    counted("sentence", sentence)
    result = run_request(ui.service, lambda: Request.from_api(
        ui.registry, text, model, device, strategy, settings, max_length, prefix, heads_off, text_field),
        analyses=frozenset())
    sentence = counted("sentence", sentence, len(result.translations))
    return result, result.translations[sentence - 1]


def why_not_endpoint(ui):
    def why_not(text: str, foil: str, step: int = 1, sentence: int = 1, model: str = None, device: str = "cpu",
                strategy: str = None, settings: dict = None, max_length: int = DEFAULT_MAX_LENGTH, prefix: str = None,
                heads_off: str = None) -> dict:
        """Translate, then explain why the translation of line `sentence` chose its piece at `step` (both from 1)
        and not the piece `foil`: each source piece's and each earlier output piece's push on the log-odds."""
        counted("step", step)
        if not isinstance(foil, str) or not foil:
            raise page_error("foil must name a piece of the model's vocabulary, such as one of a step's candidates")
        try:
            check_unicode("foil", foil)
        except RequestError as error:
            raise page_error(str(error)) from error
        result, translation = one_translation(ui, sentence, text, model, device, strategy, settings, max_length,
                                              prefix, heads_off)
        step = counted("step", step, len(translation.tgt_ids), " for this translation")
        try:
            contrast = ui.service.contrast(result, translation, step, foil)
        except ValueError as error:
            raise page_error(f"foil: {error}") from error
        return contrast_json(translation, contrast, foil)

    return why_not


def query_key_endpoint(ui):
    def query_key(text: str, kind: str = "cross", layer: int = 1, head: int = 1, query: int = 1, sentence: int = 1,
                  model: str = None, device: str = "cpu", strategy: str = None, settings: dict = None,
                  max_length: int = DEFAULT_MAX_LENGTH, prefix: str = None, heads_off: str = None) -> dict:
        """Translate, then take one head's weights at one query apart (layer, head, query and sentence from 1):
        the query vector, each key vector, their elementwise products, the scores and the weights."""
        api_choice("kind", kind, ATTENTION_KINDS)
        for name, value in (("layer", layer), ("head", head), ("query", query)):
            counted(name, value)
        result, translation = one_translation(ui, sentence, text, model, device, strategy, settings, max_length,
                                              prefix, heads_off)
        recorded = translation.recorded[kind]
        layers, heads, queries = recorded.values.shape[:3]
        layer, head = counted("layer", layer, layers), counted("head", head, heads)
        query = counted("query", query, queries, f" for {kind} in this translation")
        breakdown = ui.service.query_key(result, translation, kind, from_shown(layer), from_shown(head),
                                         from_shown(query))
        return {
            "kind": kind,
            "layer": layer,
            "head": head,
            "query": query,
            "query_token": recorded.rows[from_shown(query)],
            "key_tokens": recorded.cols[: len(breakdown.weights)],
            "query_vector": breakdown.query_vector.round(6).tolist(),
            "key_vectors": breakdown.key_vectors.round(6).tolist(),
            "products": breakdown.products.round(6).tolist(),
            "scores": breakdown.scores.round(6).tolist(),
            "weights": breakdown.weights.round(6).tolist(),
        }

    return query_key


def walkthrough_endpoint(ui):
    def walkthrough(text: str, token: int = 1, step: int = 1, head: int = 1, sentence: int = 1, model: str = None,
                    device: str = "cpu", strategy: str = None, settings: dict = None,
                    max_length: int = DEFAULT_MAX_LENGTH, prefix: str = None, heads_off: str = None,
                    layer: int = 1) -> dict:
        """Translate, then walk through how the model computed line `sentence`'s translation: every stage of the forward
        pass for source piece `token` and decoding step `step`, each with its named, labelled numbers, its text,
        formula and the package module it comes from. `stages` are at layer `layer` and head `head`; a stage that
        differs by layer or head carries `variants` at every layer and head. All counted from 1."""
        for name, value in (("token", token), ("step", step), ("head", head), ("layer", layer)):
            counted(name, value)  # the kind and sign, before translating
        result, translation = one_translation(ui, sentence, text, model, device, strategy, settings, max_length,
                                              prefix, heads_off)
        config = ui.registry.get(result.model_key).translator.model.config
        token = counted("token", token, len(translation.src_ids), " for this translation")
        step = counted("step", step, len(translation.tgt_ids), " for this translation")
        # one layer and head of both stacks at once, over the widest; a stack with fewer shows its last
        head = counted("head", head, max(config.encoder.heads, config.decoder.heads))
        layer = counted("layer", layer, max(config.encoder.layers, config.decoder.layers))
        try:
            walk = ui.service.walkthrough(result, translation, from_shown(token), from_shown(step), from_shown(head),
                                          from_shown(layer))
        except ValueError as error:
            raise page_error(str(error)) from error
        return walk_json(walk)

    return walkthrough


def server_status_endpoint(ui):
    def server_status() -> dict:
        """Where this server translates: the models it serves, its CPU decoding path (`kernel`: "ready" when the
        float16 kernel is in use, else why not; `python_step`: per model whose decoding steps the kernel cannot run,
        why) and its worker processes (`workers_status`: "ready", "starting",
        "off", or why they are unavailable; translations run in the server's own process until they are ready)."""
        pool = ui.service.pool
        return {
            "models": sorted(ui.registry.models),
            "kernel": KERNEL.status,
            "python_step": python_step_reasons(ui.registry),
            "workers": 0 if pool is None else pool.workers,
            "workers_status": "off" if pool is None else pool.status,
        }

    return server_status


def wire_api(ui, demo: gr.Blocks, more: dict | None = None) -> None:
    """Registers the endpoints on the page being built; `ui` is the page's Wiring, `more` the endpoints of other
    modules by API name (the atlas's). The view state (layer, head, each view's controls) belongs to the page and is
    no argument here."""
    endpoints = {
        "translate": endpoint(ui, translation_json, analyses=frozenset()),
        "translate_trace": endpoint(ui, trace_json, analyses=frozenset({ALTI, NORMS})),
        "translate_details": endpoint(ui, details_json),
        "why_not": why_not_endpoint(ui),
        "query_key": query_key_endpoint(ui),
        "walkthrough": walkthrough_endpoint(ui),
        "server_status": server_status_endpoint(ui),
        **(more or {}),
    }
    for name, function in endpoints.items():
        gr.api(function, api_name=name)
    omitted_arguments_take_defaults(demo, endpoints)


def omitted_arguments_take_defaults(demo: gr.Blocks, endpoints: dict) -> None:
    """A raw HTTP call may send fewer values than an endpoint has arguments (the optional ones left out); Gradio
    refuses that with an error event whose message is null. Here the omitted arguments take their defaults, as the
    Python client fills them, and a missing required one is named."""
    parameters = {f"/{name}": list(inspect.signature(function).parameters.values())
                  for name, function in endpoints.items()}
    validate = demo.validate_inputs

    def validate_inputs(block_fn, inputs: list) -> None:
        wanted = parameters.get(block_fn.api_name if str(block_fn.api_name).startswith("/")
                                else f"/{block_fn.api_name}")
        if wanted is not None and len(inputs) < len(wanted):
            missing = [p.name for p in wanted[len(inputs):] if p.default is inspect.Parameter.empty]
            if missing:
                raise page_error(f"/{str(block_fn.api_name).lstrip('/')} is missing its required argument(s) "
                                 f"{', '.join(missing)}")
            inputs.extend(p.default for p in wanted[len(inputs):])
        validate(block_fn, inputs)

    demo.validate_inputs = validate_inputs


def run_request(service: ModelService, build, analyses: frozenset[str] = EVERY_ANALYSIS) -> RunResult:
    """Builds the request (`build()`) and runs it; errors become messages for the visitor, naming the field."""
    try:
        result = service.run(build(), analyses)
    except RequestError as error:
        raise page_error(str(error)) from error
    except Overloaded as error:
        raise page_error(busy_message(error)) from error
    except Exception as error:  # one visitor's failure must not take the server down
        log.exception("translation failed")
        raise page_error(f"Translation failed: {type(error).__name__}. Try a shorter or different input.") from error
    for notice in result.notices:
        page_warning(notice)
    return result
