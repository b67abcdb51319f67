"""The decoding controls, built from the strategy registry: one input per registered setting, so a new
strategy's settings appear in the page and the API with no edit here."""
from __future__ import annotations

import inspect

import gradio as gr

from transformer.decoding.strategies import STRATEGIES, all_settings

from .components import Number, Radio, Slider
from .request import DEFAULT_MAX_LENGTH, MAX_OUTPUT_TOKENS


def strategy_radio(strategy: str):
    return Radio([(s.label, name) for name, s in STRATEGIES.items()], value=strategy, label="Strategy",
                 elem_id="strategy")


def decoding_values(strategy: str, recorded: dict) -> dict:
    """Every setting control's value for a model's recorded decoding: its strategy's settings as recorded, the
    other strategies' at their defaults."""
    return {spec.name: recorded.get(spec.name, spec.default) if spec.strategy == strategy else spec.default
            for spec in all_settings()}


def setting_inputs(strategy: str, recorded: dict) -> dict:
    """name -> component, in registry order (the API's argument order), set to the default model's recorded
    decoding (`strategy` and its `recorded` settings, from Translator.recorded_decoding); only that strategy's
    settings show."""
    inputs, values = {}, decoding_values(strategy, recorded)
    for spec in all_settings():
        common = dict(value=values[spec.name], label=spec.label, info=spec.help or None,
                      elem_id=f"setting-{spec.name}", visible=spec.strategy == strategy)
        if spec.step is None:
            inputs[spec.name] = Number(precision=0 if spec.kind is int else None, minimum=spec.minimum,
                                       maximum=spec.maximum, **common)
        else:
            inputs[spec.name] = Slider(spec.minimum, spec.maximum, step=spec.step, **common)
    return inputs


def max_length_slider():
    return Slider(1, MAX_OUTPUT_TOKENS, value=DEFAULT_MAX_LENGTH, step=1, label="Max output tokens", elem_id="max-length")


def prefix_box():
    return gr.Textbox(label="Force the start (what if)", placeholder="e.g. Eine Frau — decoding continues from here",
                      elem_id="prefix", max_lines=1)


def heads_off_box():
    return gr.Textbox(label="Heads switched off", placeholder="e.g. cross 3 2; decoder_self 1 4 (numbered from 1)",
                      elem_id="heads-off", max_lines=1)


def request_parameters(default_model: str) -> list[inspect.Parameter]:
    """The API's arguments, shared by /translate and /translate_details: text, model, device, strategy,
    every strategy's settings, max_length, prefix, heads_off. A strategy or setting left out (None) is the
    chosen model's recorded decoding: how its model card says it was tuned to decode."""
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter("text", keyword, annotation=str),
                  inspect.Parameter("model", keyword, default=default_model, annotation=str),
                  inspect.Parameter("device", keyword, default="cpu", annotation=str),
                  inspect.Parameter("strategy", keyword, default=None, annotation=str)]
    parameters += [inspect.Parameter(spec.name, keyword, default=None, annotation=spec.kind)
                   for spec in all_settings()]
    parameters.append(inspect.Parameter("max_length", keyword, default=DEFAULT_MAX_LENGTH, annotation=int))
    parameters.append(inspect.Parameter("prefix", keyword, default=None, annotation=str))  # None: no forcing
    parameters.append(inspect.Parameter("heads_off", keyword, default=None, annotation=str))  # "cross 3 2; ..."
    return parameters
