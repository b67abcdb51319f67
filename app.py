"""Attention Explorer: translate a sentence with a Transformer trained from scratch and look inside it.

    python app.py            # serves on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (default 127.0.0.1:7860)
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import gradio as gr
import torch

from explorer import render
from explorer.components import Dropdown, Number, Radio, Slider
from explorer.registry import discover
from explorer.session import MAX_OUTPUT_TOKENS, DecodingSettings, RunResult, SettingError, run

ROOT = Path(__file__).resolve().parent
EXAMPLES = [line for line in (ROOT / "assets" / "examples.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
CSS = (ROOT / "assets" / "style.css").read_text(encoding="utf-8")
PLAY_DELAY_S = 0.35
PLAY_PLOT_EVERY = 4  # re-drawing a figure remounts it: stream text every step, figures every few steps

logging.basicConfig(level=logging.WARNING)
log = logging.getLogger("attention-explorer")
registry = discover(ROOT / "checkpoints")  # every model is loaded once, here, never per request
for name, why in registry.problems.items():
    log.warning("checkpoint %s skipped: %s", name, why)
# CUDA stays selectable without a GPU: the request then runs on the CPU and says so
DEVICES = [("CPU", "cpu"), ("CUDA" if torch.cuda.is_available() else "CUDA (not available here: falls back to CPU)", "cuda")]


def translate(text, model_key="en-de", device="cpu", strategy="greedy", beam_size=4, length_penalty=0.6, temperature=1.0,
              top_k=0, top_p=1.0, seed=0, max_length=64, kind="cross", layer=None, head=None, merge=False):
    """Translate each line; returns the translation first, then everything the views draw (in the views
    the visitor has chosen: attention kind, layer, head, merged words)."""
    settings = DecodingSettings(strategy, beam_size, length_penalty, temperature, top_k, top_p, seed, max_length)
    try:
        result = run(registry, text, model_key, device, settings)
    except SettingError as error:
        raise gr.Error(str(error)) from error
    except Exception as error:  # one visitor's failure must not take the server down
        log.exception("translation failed")
        raise gr.Error(f"Translation failed: {type(error).__name__}. Try a shorter or different input.") from error
    for notice in result.notices:
        gr.Warning(notice)
    return (("\n".join(t.text for t in result.translations), render.summary(result), result)
            + sentence_outputs(result, 0, kind, layer, head, merge))


def sentence_outputs(result: RunResult, sentence, kind, layer, head, merge):
    """Everything that depends on the chosen sentence, with controls reset to its sizes."""
    translation = result.translations[sentence]
    n_layers, n_heads = translation.attention.cross.shape[:2]
    layer = layer if layer in {str(i) for i in range(n_layers)} | {"overview"} else str(n_layers - 1)
    head = head if head in {str(i) for i in range(n_heads)} | {"mean", "all"} else "mean"
    steps = len(translation.steps)
    model = registry.get(result.model_key).translator.model
    return (
        gr.update(choices=render.sentence_choices(result), value=sentence),
        gr.update(choices=render.layer_choices(n_layers), value=layer),
        gr.update(choices=render.head_choices(n_heads), value=head),
        render.tokens_table(translation),
        gr.update(minimum=1, maximum=steps, value=steps, step=1),
        *render.step_outputs(result, sentence, steps, layer, head),
        render.attention_figure(result, sentence, kind, layer, head, merge),
        render.positional_norms(model, translation),
    )


def on_sentence(result, sentence, kind, layer, head, merge):
    if result is None:
        raise gr.Error("Translate a sentence first.")
    return sentence_outputs(result, int(sentence), kind, layer, head, merge)


def on_attention(result, sentence, kind, layer, head, merge):
    if result is None:
        return None
    return render.attention_figure(result, int(sentence or 0), kind, layer, head, merge)


def on_step(result, sentence, step, layer, head):
    if result is None:
        return gr.update(), None, None, None
    return render.step_outputs(result, int(sentence or 0), step, layer, head)


def play(result, sentence, layer, head):
    """Walks through the recorded steps one by one."""
    if result is None:
        raise gr.Error("Translate a sentence first.")
    steps = len(result.translations[int(sentence or 0)].steps)
    for step in range(1, steps + 1):
        markdown, candidates, source, hypotheses = render.step_outputs(result, int(sentence or 0), step, layer, head)
        draw = step == steps or step % PLAY_PLOT_EVERY == 1
        yield (step, markdown, candidates if draw else gr.update(), source if draw else gr.update(),
               hypotheses if draw else gr.update())
        if step < steps:
            time.sleep(PLAY_DELAY_S)


def on_model(model_key, dimensions):
    model = registry.get(model_key).translator.model
    heatmap, curves, similarity = render.positional_figures(model, parse_dimensions(dimensions, model.config.d_model))
    card, table = render.model_card(model, registry.get(model_key).translator.metrics, None)
    return heatmap, curves, similarity, card, table


def parse_dimensions(dimensions, d_model: int) -> list[int]:
    chosen = [int(d) for d in (dimensions or []) if str(d).isdigit() and int(d) < d_model]
    return chosen or [0, 1, d_model // 8, d_model // 4, d_model // 2]


def on_dimensions(model_key, dimensions):
    model = registry.get(model_key).translator.model
    return render.positional_curves(model, parse_dimensions(dimensions, model.config.d_model))


def on_export(result):
    if result is None:
        raise gr.Error("Translate a sentence first, then export it.")
    return render.export_files(result)


def translate_details(text: str, model: str = "en-de", strategy: str = "greedy", beam_size: int = 4,
                      length_penalty: float = 0.6, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                      seed: int = 0, max_length: int = 64, device: str = "cpu") -> dict:
    """Translate and return every number behind the plots: tokens, ids, steps with top-k candidates, and
    attention weights [layer][head][query][key] for encoder_self, decoder_self and cross."""
    settings = DecodingSettings(strategy, beam_size, length_penalty, temperature, top_k, top_p, seed, max_length)
    try:
        return render.details_json(run(registry, text, model, device, settings))
    except SettingError as error:
        raise gr.Error(str(error)) from error


default_model = registry.get(registry.default_key).translator.model
# Gradio's copies of exported files: removed after an hour, checked every hour
with gr.Blocks(title="Attention Explorer", delete_cache=(3600, 3600)) as demo:
    result_state = gr.State(None)
    if registry.problems:
        gr.Markdown("⚠️ Skipped checkpoint(s): " + "; ".join(f"**{render.text(name)}**: {render.text(why)}"
                                                         for name, why in registry.problems.items()), elem_id="problems")
    gr.Markdown("# Attention Explorer\nA Transformer trained from scratch translates your sentence; then walk through "
                "every decoding step and every attention head. Rows of every heatmap are queries, columns are keys.")
    with gr.Row():
        with gr.Column(scale=3, min_width=300):
            source = gr.Textbox(label="Source text", lines=3, elem_id="source",
                                placeholder="One sentence per line, e.g. A man is riding a bicycle.")
            translate_button = gr.Button("Translate", variant="primary", elem_id="translate-button")
            gr.Examples(EXAMPLES, inputs=source, label="Examples (image-caption style, like the training data)")
        with gr.Column(scale=2, min_width=260):
            model_choice = Dropdown(registry.choices, value=registry.default_key, label="Model", elem_id="model")
            device_choice = Radio(DEVICES, value="cpu", label="Device", elem_id="device")
            with gr.Accordion("Decoding settings", open=False):
                strategy = Radio([("greedy", "greedy"), ("beam search", "beam"), ("sampling", "sample")],
                                    value="greedy", label="Strategy", elem_id="strategy")
                beam_size = Slider(1, 8, value=4, step=1, label="Beam size")
                length_penalty = Slider(0.0, 2.0, value=0.6, step=0.1, label="Length penalty α (beam)")
                temperature = Slider(0.1, 2.0, value=1.0, step=0.05, label="Temperature (sampling)")
                top_k = Slider(0, 100, value=0, step=1, label="Top-k (sampling, 0 = off)")
                top_p = Slider(0.05, 1.0, value=1.0, step=0.05, label="Top-p (sampling)")
                seed = Number(value=0, precision=0, minimum=0, label="Seed (sampling)")
                max_length = Slider(1, MAX_OUTPUT_TOKENS, value=64, step=1, label="Max output tokens")
    translation = gr.Textbox(label="Translation", interactive=False, elem_id="translation", lines=2)
    summary = gr.Markdown(elem_id="summary")
    with gr.Row():
        sentence = gr.Dropdown([], label="Sentence", elem_id="sentence")
        layer = gr.Dropdown(render.layer_choices(default_model.config.n_layers), value=str(default_model.config.n_layers - 1),
                            label="Layer", elem_id="layer")
        head = gr.Dropdown(render.head_choices(default_model.config.n_heads), value="mean", label="Head", elem_id="head")
    with gr.Tabs():
        with gr.Tab("Step by step", id="steps"):
            with gr.Row():
                step = Slider(1, MAX_OUTPUT_TOKENS, value=1, step=1, label="Decoding step", elem_id="step")
                play_button = gr.Button("▶ Play steps", scale=0, elem_id="play-button")
            step_text = gr.Markdown(elem_id="step-text")
            with gr.Row():
                candidates_plot = gr.Plot(label="Next-token candidates", elem_id="candidates-plot")
                source_plot = gr.Plot(label="Where this step looked in the source", elem_id="step-source-plot")
            hypotheses = gr.Dataframe(label="Beam search: live hypotheses after this step", elem_id="hypotheses",
                                      interactive=False)
        with gr.Tab("Attention", id="attention"):
            with gr.Row():
                kind = Radio([("Encoder self-attention", "encoder_self"), ("Decoder masked self-attention", "decoder_self"),
                                 ("Cross-attention", "cross")], value="cross", label="Attention", elem_id="kind")
                merge = gr.Checkbox(False, label="Merge subword pieces into words", elem_id="merge")
            attention_plot = gr.Plot(label="Attention heatmap", elem_id="attention-plot")
        with gr.Tab("Tokens", id="tokens"):
            tokens = gr.Dataframe(label="Sentencepiece pieces and ids", elem_id="tokens", interactive=False)
        with gr.Tab("Positional encoding", id="positional"):
            dimensions = gr.Dropdown([str(d) for d in range(default_model.config.d_model)], multiselect=True,
                                     value=[str(d) for d in parse_dimensions([], default_model.config.d_model)],
                                     label="Dimensions to plot", elem_id="dimensions")
            with gr.Row():
                encoding_plot = gr.Plot(label="Encoding table", elem_id="encoding-plot")
                similarity_plot = gr.Plot(label="Position similarity", elem_id="similarity-plot")
            curves_plot = gr.Plot(label="Dimensions over positions", elem_id="curves-plot")
            norms_plot = gr.Plot(label="Token vs positional part for this input", elem_id="norms-plot")
        with gr.Tab("Model", id="model"):
            model_text = gr.Markdown(elem_id="model-card")
            architecture = gr.Dataframe(label="Architecture: every module, its output shape on a 3-token example, its parameters",
                                        elem_id="architecture", interactive=False)
        with gr.Tab("Export", id="export"):
            gr.Markdown("Tokens, decoding steps and every attention weight of the current translation.")
            export_button = gr.Button("Export JSON and CSV", elem_id="export-button")
            export_files = gr.File(label="Downloads", file_count="multiple", elem_id="export-files")

    settings_inputs = [source, model_choice, device_choice, strategy, beam_size, length_penalty, temperature, top_k,
                       top_p, seed, max_length, kind, layer, head, merge]
    sentence_views = [sentence, layer, head, tokens, step, step_text, candidates_plot, source_plot, hypotheses,
                      attention_plot, norms_plot]
    translate_outputs = [translation, summary, result_state] + sentence_views
    for trigger in (translate_button.click, source.submit):
        trigger(translate, settings_inputs, translate_outputs, api_name="translate" if trigger == translate_button.click else False)
    sentence.input(on_sentence, [result_state, sentence, kind, layer, head, merge], sentence_views, api_visibility="private")
    view_inputs = [result_state, sentence, kind, layer, head, merge]
    # re-plotting from the stored result takes ~10 ms and never runs the model: skip the queue's round trips
    for control in (kind, layer, head, merge):
        control.input(on_attention, view_inputs, attention_plot, api_visibility="private", queue=False)
    for control in (step, layer, head):
        control.input(on_step, [result_state, sentence, step, layer, head],
                      [step_text, candidates_plot, source_plot, hypotheses], api_visibility="private", queue=False)
    play_button.click(play, [result_state, sentence, layer, head], [step, step_text, candidates_plot, source_plot, hypotheses],
                      api_visibility="private")
    model_outputs = [encoding_plot, curves_plot, similarity_plot, model_text, architecture]
    model_choice.change(on_model, [model_choice, dimensions], model_outputs, api_visibility="private")
    demo.load(on_model, [model_choice, dimensions], model_outputs, api_visibility="private")
    dimensions.change(on_dimensions, [model_choice, dimensions], curves_plot, api_visibility="private")
    export_button.click(on_export, result_state, export_files, api_visibility="private")
    gr.api(translate_details, api_name="translate_details")

# plain `def` handlers run in worker threads; more of them than cores only adds contention
demo.queue(default_concurrency_limit=max(1, os.cpu_count() or 1), max_size=64)

if __name__ == "__main__":
    demo.launch(css=CSS, theme=gr.themes.Soft(), run_history=False, footer_links=["api", "gradio", "settings"])
