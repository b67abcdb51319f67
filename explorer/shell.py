"""The page around the views: input, decoding controls, the translation, the shared sentence / layer /
head controls and one tab per view. The events are wired in wiring.py, the API in api.py, links in share.py.
"""
from __future__ import annotations

import gradio as gr
import torch

from . import controls
from .assets import PAGE_CSS, PAGE_HEAD
from .components import Dropdown, Radio
from .language_offer import offer_button
from .page_translate import alert_box, result_key_box
from .registry import Registry
from .text import examples_for, literal, placeholder_for
from .ui_state import Wiring
from .views import VIEWS, View
from .views.selection import head_choices, layer_choices
from .wiring import wire

CSS = PAGE_CSS  # the page's style sheet, as app.py and the tests launch it


def page_theme() -> gr.themes.Base:
    """Gradio's Soft theme with each text at WCAG 2.1 AA contrast (4.5:1) on what it sits on, light and dark, as
    axe-core measures it (tests/test_browser_accessibility.py): Soft's indigo-500 fills under white text (4.46:1), its
    indigo-500 labels on indigo-100 (3.62:1), its grey-400 notes on white (2.53:1) and its links on dark (4.28:1)
    fall just short, so each takes the next shade."""
    return gr.themes.Soft().set(
        button_primary_background_fill="*primary_600", button_primary_background_fill_dark="*primary_600",
        button_primary_background_fill_hover="*primary_700", button_primary_background_fill_hover_dark="*primary_700",
        button_primary_border_color="*primary_600", button_primary_border_color_dark="*primary_600",
        checkbox_label_background_fill_selected="*primary_600",
        block_label_text_color="*primary_700", block_title_text_color="*primary_700",
        body_text_color_subdued="*neutral_600", input_placeholder_color="*neutral_500",
        link_text_color_dark="*secondary_400", link_text_color_visited_dark="*secondary_400",
        link_text_color_active_dark="*secondary_400",
    )


LAUNCH = {"css": CSS, "head": PAGE_HEAD, "theme": page_theme(), "run_history": False,
          "footer_links": ["api", "gradio", "settings"]}


def build_demo(registry: Registry, views: list[View] | None = None) -> tuple[gr.Blocks, Wiring]:
    views = VIEWS if views is None else views
    ui = Wiring(registry, views)
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
                ui.add(input_column(registry))
            with gr.Column(scale=5, min_width=320, elem_id="live-column"):
                for view in views:
                    if view.placement == "first_screen":
                        ui.add(view.build(context), owner=view.name)
        ui.add(selectors(registry.get(registry.default_key).profile.config))
        with gr.Tabs(overflow_behavior="wrap") as tabs:  # every tab visible by its label, on as many rows as it takes
            ui.add({"tabs": tabs})
            for view in views:
                if view.placement == "tab":
                    with gr.Tab(view.title, id=view.name) as tab:
                        ui.add(view.build(context), owner=view.name)
                    ui.tabs[view.name] = tab
        ui.add({"footer": gr.Markdown(elem_id="footer")})
        ui.open_tab = gr.State(next((v.name for v in views if v.placement == "tab"), ""))
        ui.state_names = ["sentence", "layer", "head"] + [name for view in views for name in view.controls]
        wire(ui, demo)
    return demo, ui


def input_column(registry: Registry) -> dict:
    """The request's controls (text, model, decoding settings), the translation and what goes with it, by name."""
    default = registry.get(registry.default_key)
    language = registry.source_language(registry.default_key)
    devices = [
        ("CPU", "cpu"),
        ("CUDA" if torch.cuda.is_available() else "CUDA (not available here: falls back to CPU)", "cuda"),
    ]
    named = {"source": gr.Textbox(label="Source text", lines=2, elem_id="source",
                                  placeholder=placeholder_for(language))}
    with gr.Row(elem_id="model-row"):
        named["model"] = Dropdown(registry.choices, value=registry.default_key, label="Model", elem_id="model",
                                  scale=3)
        named["translate_button"] = gr.Button("Translate", variant="primary", elem_id="translate-button", scale=2)
    with gr.Row(elem_id="language-row"):
        codes, (source, target) = registry.languages(registry.default_key), registry.default_languages(
            registry.default_key)
        named["source_lang"] = controls.language_dropdown("Source language", "source-lang", codes, source)
        named["target_lang"] = controls.language_dropdown("Target language", "target-lang", codes, target)
    named["translate_error"] = alert_box()  # what was wrong with the last Translate, if anything
    named["result_key"] = result_key_box()
    named["example"] = gr.Dropdown(
        examples_for(language), value=None,
        label="Example sentences", info="everyday sentences and image captions, like the training data",
        elem_id="example")
    named["translation"] = gr.Textbox(label="Translation", interactive=False, elem_id="translation", lines=2)
    named["summary"] = gr.Markdown(elem_id="summary")
    named["language_offer"] = offer_button()
    with gr.Row(elem_id="link-row"):
        named["copy_link"] = gr.Button("Copy link to this view", size="sm", elem_id="copy-link", scale=1)
        named["link"] = gr.Textbox(show_label=False, interactive=False, elem_id="link", scale=3, max_lines=1,
                                   placeholder="the link appears here")
    with gr.Accordion("Decoding settings", open=False, elem_id="decoding-settings"):
        named["device"] = Radio(devices, value="cpu", label="Device", elem_id="device")
        decoding = default.translator.recorded_decoding()
        named["strategy"] = controls.strategy_radio(decoding[0])
        settings = controls.setting_inputs(*decoding)
        named["new_seed"] = gr.Button("New seed, run again", size="sm", elem_id="new-seed",
                                      visible="sample.seed" in settings and settings["sample.seed"].visible)
        named |= settings
        named["max_length"] = controls.max_length_slider()
        named["prefix"] = controls.prefix_box()
        named["heads_off"] = controls.heads_off_box()
    return named


def selectors(config) -> dict:
    """The sentence, layer and head the views show, above the tabs: the layers and heads of the widest stack. The
    live picture and the walk-through have pickers of their own, so these say which views they steer."""
    steers = "for the tabs below (the live picture and the walk-through have their own)"
    with gr.Row():
        return {
            "sentence": gr.Dropdown([], label="Sentence", elem_id="sentence"),
            "layer": gr.Dropdown(layer_choices(max(config.encoder.layers, config.decoder.layers)),
                                 value=str(config.decoder.layers - 1), label="Layer",  # the cross-attention's last
                                 info=steers, elem_id="layer"),
            "head": gr.Dropdown(head_choices(max(config.encoder.heads, config.decoder.heads)), value="mean",
                                label="Head", info=steers, elem_id="head"),
        }
