"""The page around the views: input, decoding controls, the translation, the shared sentence / layer /
head controls and one tab per view. The events are wired in wiring.py, the API in api.py, links in share.py.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr
import torch

from . import controls
from .components import Dropdown, Radio
from .language_offer import offer_button
from .registry import Registry
from .text import examples_for, literal, placeholder_for
from .views import VIEWS, View
from .views.selection import head_choices, layer_choices
from .wiring import Wiring, wire

CSS = (Path(__file__).resolve().parent / "static" / "style.css").read_text(encoding="utf-8")


def build_demo(registry: Registry, views: list[View] | None = None) -> tuple[gr.Blocks, Wiring]:
    views = VIEWS if views is None else views
    ui = Wiring(registry, views)
    default = registry.get(registry.default_key)
    config = default.profile.config
    devices = [
        ("CPU", "cpu"),
        ("CUDA" if torch.cuda.is_available() else "CUDA (not available here: falls back to CPU)", "cuda"),
    ]
    # Gradio's copies of exported files: removed after an hour, checked every hour. No analytics: the app works
    # offline, and Gradio's version check costs start-up time (an HTTPS client in a thread)
    with gr.Blocks(title="Attention Explorer", delete_cache=(3600, 3600), analytics_enabled=False) as demo:
        ui.result_state = gr.State(None)
        if registry.problems:
            gr.Markdown(
                "⚠️ Skipped checkpoint(s): "
                + "; ".join(f"**{literal(name)}**: {literal(why)}" for name, why in registry.problems.items()),
                elem_id="problems",
            )
        gr.Markdown("## Attention Explorer · a Transformer trained from scratch translates; look inside it",
                    elem_id="title")
        context = ui.context(registry.default_key)
        with gr.Row(equal_height=False, elem_id="first-screen"):
            with gr.Column(scale=4, min_width=320, elem_id="input-column"):
                source = gr.Textbox(label="Source text", lines=2, elem_id="source",
                                    placeholder=placeholder_for(registry.source_language(registry.default_key)))
                with gr.Row(elem_id="model-row"):
                    model_choice = Dropdown(
                        registry.choices, value=registry.default_key, label="Model", elem_id="model", scale=3
                    )
                    translate_button = gr.Button("Translate", variant="primary", elem_id="translate-button", scale=2)
                example = gr.Dropdown(
                    examples_for(registry.source_language(registry.default_key)),
                    value=None,
                    label="Example sentences (everyday sentences and image captions, like the training data)",
                    elem_id="example",
                )
                translation = gr.Textbox(label="Translation", interactive=False, elem_id="translation", lines=2)
                summary_text = gr.Markdown(elem_id="summary")
                language_offer = offer_button()
                with gr.Row(elem_id="link-row"):
                    copy_link = gr.Button("Copy link to this view", size="sm", elem_id="copy-link", scale=1)
                    link = gr.Textbox(show_label=False, interactive=False, elem_id="link", scale=3, max_lines=1,
                                      placeholder="the link appears here")
                with gr.Accordion("Decoding settings", open=False, elem_id="decoding-settings"):
                    device_choice = Radio(devices, value="cpu", label="Device", elem_id="device")
                    decoding = default.translator.recorded_decoding()
                    strategy = controls.strategy_radio(decoding[0])
                    settings = controls.setting_inputs(*decoding)
                    new_seed = gr.Button("New seed, run again", size="sm", elem_id="new-seed",
                                         visible="sample.seed" in settings and settings["sample.seed"].visible)
                    max_length = controls.max_length_slider()
                    prefix = controls.prefix_box()
                    heads_off = controls.heads_off_box()
            with gr.Column(scale=5, min_width=320, elem_id="live-column"):
                for view in views:
                    if view.placement == "first_screen":
                        ui.add(view.build(context), owner=view.name)
        with gr.Row():
            sentence = gr.Dropdown([], label="Sentence", elem_id="sentence")
            layer = gr.Dropdown(
                layer_choices(config.n_layers), value=str(config.n_layers - 1), label="Layer", elem_id="layer"
            )
            head = gr.Dropdown(head_choices(config.n_heads), value="mean", label="Head", elem_id="head")
        ui.add(
            {
                "source": source,
                "translate_button": translate_button,
                "model": model_choice,
                "device": device_choice,
                "example": example,
                "new_seed": new_seed,
                "copy_link": copy_link,
                "link": link,
                "strategy": strategy,
                **settings,
                "max_length": max_length,
                "prefix": prefix,
                "heads_off": heads_off,
                "translation": translation,
                "summary": summary_text,
                "language_offer": language_offer,
                "sentence": sentence,
                "layer": layer,
                "head": head,
            }
        )
        with gr.Tabs(overflow_behavior="wrap") as tabs:  # every tab visible by its label, on as many rows as it takes
            ui.add({"tabs": tabs})
            for view in views:
                if view.placement == "tab":
                    with gr.Tab(view.title, id=view.name) as tab:
                        ui.add(view.build(context), owner=view.name)
                    ui.tabs[view.name] = tab
        footer = gr.Markdown(elem_id="footer")
        ui.add({"footer": footer})
        ui.open_tab = gr.State(next((v.name for v in views if v.placement == "tab"), ""))
        ui.state_names = ["sentence", "layer", "head"] + [name for view in views for name in view.controls]
        wire(ui, demo)
    return demo, ui
