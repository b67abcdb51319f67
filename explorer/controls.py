"""The decoding controls, built from the strategy registry: one input per registered setting, so a new
strategy's settings appear in the page and the API with no edit here."""
from __future__ import annotations

import gradio as gr

from transformer.decoding.strategies import STRATEGIES, all_settings

from .components import Number, Radio, Slider
from .request import DEFAULT_MAX_LENGTH, MAX_OUTPUT_TOKENS


def strategy_radio(strategy: str):
    return Radio([(s.label, name) for name, s in STRATEGIES.items()], value=strategy, label="Strategy",
                 elem_id="strategy")


def decoding_values(strategy: str, recorded: dict) -> dict:
    """Every setting control's value (by its key) for a model's recorded decoding: its strategy's settings as
    recorded, the other strategies' at their defaults."""
    return {spec.key: recorded.get(spec.name, spec.default) if spec.strategy == strategy else spec.default
            for spec in all_settings()}


def setting_inputs(strategy: str, recorded: dict) -> dict:
    """key ("beam.beam_size") -> component, in registry order, set to the default model's recorded decoding
    (`strategy` and its `recorded` settings, from Translator.recorded_decoding); only that strategy's show.
    Each strategy's settings are its own controls, even where two strategies share a setting's name."""
    inputs, values = {}, decoding_values(strategy, recorded)
    for spec in all_settings():
        common = dict(value=values[spec.key], label=spec.label, info=spec.help or None,
                      elem_id=f"setting-{spec.strategy}-{spec.name}", visible=spec.strategy == strategy)
        if spec.step is None:
            inputs[spec.key] = Number(precision=0 if spec.kind is int else None, minimum=spec.minimum,
                                      maximum=spec.maximum, **common)
        else:
            inputs[spec.key] = Slider(spec.minimum, spec.maximum, step=spec.step, **common)
    return inputs


def max_length_slider():
    return Slider(
        1, MAX_OUTPUT_TOKENS, value=DEFAULT_MAX_LENGTH, step=1, label="Max output tokens", elem_id="max-length"
    )


def prefix_box():
    return gr.Textbox(label="Force the start (what if)", placeholder="e.g. Eine Frau — decoding continues from here",
                      elem_id="prefix", max_lines=1)


def heads_off_box():
    return gr.Textbox(label="Heads switched off", placeholder="e.g. cross 3 2; decoder_self 1 4 (numbered from 1)",
                      elem_id="heads-off", max_lines=1)


def language_dropdown(label: str, elem_id: str, codes: list[str], value: str | None):
    """A multilingual model's source or target language (NLLB has 200: typing filters them); hidden for a model that
    translates one direction."""
    return gr.Dropdown(codes, value=value, label=label, elem_id=elem_id, filterable=True, visible=bool(codes))
