"""Model: every module with its output shape and parameters, the parameter count checked against the
closed-form count, and the model card from metrics.json."""
from __future__ import annotations

import gradio as gr
import pandas as pd

from transformer.corpus.mix import corpora_described
from transformer.training.model_card import stage_line, training_stages

from ..text import literal
from .base import MODEL, View


class ModelView(View):
    name, title = "model", "Model"

    def build(self, context):
        card = gr.Markdown(elem_id="model-card")
        table = gr.Dataframe(label="Architecture: every module, its output shape on a 3-token source and a 2-token "
                                   "decoder input (batch 1), its parameters", elem_id="architecture", interactive=False)
        return {"model_card": card, "architecture": table}

    def render(self, result, state, context, changed):
        if changed != MODEL:
            return {}
        profile = context.profile
        return {"model_card": card_markdown(profile), "architecture": architecture_table(profile)}


def card_markdown(profile) -> str:
    config, metrics = profile.config, profile.metrics
    check = "✓ matches" if profile.parameters == profile.closed_form_parameters else "✗ differs from"
    lines = [
        f"**{profile.parameters:,} trainable parameters** — {check} the closed-form count "
        f"{profile.closed_form_parameters:,}.",
        f"{config.stacks_text()}, d_model {config.d_model}, {config.norm}-norm, "
        f"{config.pos_encoding} positions, "
        f"vocabulary {config.tgt_vocab_size:,}{', shared embeddings' if config.share_embeddings else ''}"
        f"{', output tied to the target embedding' if config.tie_output else ''}.",
    ]
    if metrics and "origin" in metrics:  # a model converted from Hugging Face (transformer/convert.py)
        origin = metrics["origin"]
        lines.append(f"Converted from Hugging Face {literal(str(origin.get('source', '?')))} "
                     f"({literal(str(origin.get('architecture', '?')))}, license "
                     f"{literal(str(origin.get('license', '?')))}): {arithmetic_text(config)}.")
    elif metrics:
        scores = metrics.get("scores", {})
        stages = training_stages(metrics)
        lines.append(f"Trained in {len(stages)} stage(s): " + "; then ".join(
            f"stage {number}, {literal(stage_line(stage))}" for number, stage in enumerate(stages, start=1)) + ".")
        if "data" in metrics:
            lines.append(f"Learned from {corpora_described(metrics['data'])}.")
        for split, s in scores.items():
            lines.append(
                f"- **{split}**: BLEU {s['bleu']}, chrF {s['chrf']} ({_count(s.get('sentences'))} sentences) — "
                f"`{s['bleu_signature']}`"
            )
    return "\n\n".join(lines)


def arithmetic_text(config) -> str:
    """A converted model's arithmetic in words, read from its config: "SiLU feed-forward, post-norm LayerNorm layers
    without a final norm, sinusoidal positions (halves layout)"."""
    feed_forward = f"{'gated ' if config.gated_ff else ''}{config.activation} feed-forward"
    norms = (f"{config.norm}-norm {'RMS norm' if config.norm_kind == 'rms' else 'LayerNorm'} layers "
             f"{'with' if config.final_norm else 'without'} a final norm"
             f"{', a norm on the embeddings' if config.embedding_norm else ''}")
    positions = {"sinusoidal": f"sinusoidal positions ({config.sinusoidal_layout} layout)",
                 "learned": "learned positions", "relative": "relative position buckets added to the scores"}
    scale = "" if config.attention_scale else ", scores without 1/√d_k"
    return f"{feed_forward}, {norms}, {positions[config.pos_encoding]}{scale}"


def _count(value) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def architecture_table(profile) -> pd.DataFrame:
    rows = [{**row, "parameters": f"{row['parameters']:,}"} for row in profile.architecture]
    return pd.DataFrame(rows)
