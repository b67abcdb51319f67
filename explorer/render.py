"""What each view shows for a stored RunResult: figures, tables and text. Never runs decoding."""
from __future__ import annotations

import html
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from transformer import Translation, expected_parameter_count, figures
from transformer.architecture import architecture_rows
from transformer.export import attention_csv, steps_csv, to_json
from transformer.model import Transformer
from transformer.views import KIND_TITLES, axis_labels, merge_to_words, select_heads

from .session import STRATEGY_LABELS, RunResult

AXIS_TITLES = {
    "encoder_self": ("query: source token", "key: source token"),
    "decoder_self": ("query: the token it predicted", "key: decoder input (<s>, then the tokens fed back)"),
    "cross": ("query: the token it predicted", "key: source token"),
}


def text(value: str) -> str:
    """Visitor-supplied text for Markdown: shown literally, never as markup."""
    return html.escape(value, quote=False).replace("*", "&#42;").replace("_", "&#95;").replace("`", "&#96;")


def summary(result: RunResult) -> str:
    s = result.settings
    strategy = STRATEGY_LABELS[s.strategy] + (f" (beam {s.beam_size}, length penalty {s.length_penalty})" if s.strategy == "beam" else "")
    if s.strategy == "sample":
        strategy += f" (temperature {s.temperature}, top-k {s.top_k or 'off'}, top-p {s.top_p}, seed {s.seed})"
    lines = [f"**{len(result.translations)} sentence(s)** translated in **{result.milliseconds:.0f} ms** on "
             f"{result.device.upper()} with {strategy}, attention captured."]
    lines += [f"⚠️ {text(n)}" for n in result.notices]
    return "\n\n".join(lines)


def tokens_table(translation: Translation) -> pd.DataFrame:
    rows = [("source", i, p, t) for i, (p, t) in enumerate(zip(translation.src_tokens, translation.src_ids))]
    rows += [("target", i, p, t) for i, (p, t) in enumerate(zip(translation.tgt_tokens, translation.tgt_ids))]
    return pd.DataFrame(rows, columns=["side", "position", "piece", "id"])


def sentence_choices(result: RunResult) -> list[tuple[str, int]]:
    return [(f"{i + 1}: {t.text[:60] or '(empty)'}", i) for i, t in enumerate(result.translations)]


def layer_choices(n_layers: int) -> list[tuple[str, str]]:
    return [(f"Layer {i + 1}", str(i)) for i in range(n_layers)] + [("All layers × heads (overview)", "overview")]


def head_choices(n_heads: int) -> list[tuple[str, str]]:
    return [("Mean over heads", "mean"), ("All heads (tiled)", "all")] + [(f"Head {i + 1}", str(i)) for i in range(n_heads)]


def _maybe_merge(weights, rows, cols, merge: bool):
    return merge_to_words(weights, rows, cols) if merge else (weights, rows, cols)


def attention_figure(result: RunResult, sentence: int, kind: str, layer: str, head: str, merge: bool) -> go.Figure:
    translation = result.translations[sentence]
    weights = getattr(translation.attention, kind)  # (L, H, rows, cols)
    n_layers, n_heads = weights.shape[:2]
    rows, cols = axis_labels(translation.src_tokens, translation.tgt_tokens, kind)
    row_title, col_title = AXIS_TITLES[kind]
    unit = " (words)" if merge else ""
    if layer == "overview":
        tiles, titles = [], []
        for layer_index in range(n_layers):
            for h in range(n_heads):
                tile, r, c = _maybe_merge(weights[layer_index, h], rows, cols, merge)
                tiles.append(tile)
                titles.append(f"L{layer_index + 1} H{h + 1}")
        return figures.tiled_heatmap(tiles, titles, n_heads, r, c,
                                     f"{KIND_TITLES[kind]}{unit}: every layer (rows) × head (columns)", show_token_ticks=False,
                                     row_group_titles=[f"L{i + 1}" for i in range(n_layers)],
                                     col_group_titles=[f"H{h + 1}" for h in range(n_heads)])
    layer_index = int(layer)
    if head == "all":
        merged = [_maybe_merge(weights[layer_index, h], rows, cols, merge) for h in range(n_heads)]
        return figures.tiled_heatmap([m[0] for m in merged], [f"head {h + 1}" for h in range(n_heads)], min(n_heads, 4),
                                     merged[0][1], merged[0][2],
                                     f"{KIND_TITLES[kind]}{unit}: layer {layer_index + 1}, all {n_heads} heads")
    matrix, r, c = _maybe_merge(select_heads(weights, layer_index, head), rows, cols, merge)
    which = f"mean of {n_heads} heads" if head == "mean" else f"head {int(head) + 1}"
    return figures.attention_heatmap(matrix, r, c, f"{KIND_TITLES[kind]}{unit}: layer {layer_index + 1}, {which}",
                                     row_title, col_title)


def step_outputs(result: RunResult, sentence: int, step: int, layer: str, head: str):
    """(markdown, candidates figure, source-attention figure, hypotheses table) for 1-based `step`."""
    translation = result.translations[sentence]
    step = max(1, min(int(step), len(translation.steps)))
    current = translation.steps[step - 1]
    prefix = " ".join(text(t) for t in translation.decoder_input_tokens[:step])
    markdown = (f"**Step {step} of {len(translation.steps)}.** Decoder input so far: {prefix}  \n"
                f"Chose **{text(current.token)}** with probability {current.prob:.1%}.")
    candidates = figures.candidates_bar(current.topk, current.token, f"Step {step}: top {len(current.topk)} next-token candidates")
    cross = translation.attention.cross  # (L, H, T, S)
    layer_index = cross.shape[0] - 1 if layer == "overview" else int(layer)
    head_value = "mean" if head in ("all", "mean") else head
    weights = select_heads(cross[:, :, step - 1 : step], layer_index, head_value)[0]
    which = "mean over heads" if head_value == "mean" else f"head {int(head_value) + 1}"
    source = figures.source_attention_bar(weights, translation.src_tokens,
                                          f"Step {step}: cross-attention over the source (layer {layer_index + 1}, {which})")
    hypotheses = pd.DataFrame(
        [(rank + 1, h, round(score, 3)) for rank, (h, score) in enumerate(current.hypotheses or [])],
        columns=["rank", "live hypothesis after this step", "log-probability"],
    )
    return markdown, candidates, source, hypotheses


POSITIONS_SHOWN = 100


def positional_table(model: Transformer) -> np.ndarray:
    """The first POSITIONS_SHOWN rows of the model's positional table (sinusoidal or learned), (P, D)."""
    return model.positions.table[:POSITIONS_SHOWN].detach().float().cpu().numpy()


def positional_curves(model: Transformer, dimensions: list[int]) -> go.Figure:
    table = positional_table(model)
    return figures.encoding_curves(table, [d for d in dimensions if 0 <= d < table.shape[1]] or [0, 1],
                                   "Chosen dimensions over positions")


def positional_figures(model: Transformer, dimensions: list[int]):
    """The model's encoding table, chosen dimensions over positions, and position-to-position similarity."""
    table = positional_table(model)
    kind = "sinusoidal" if model.config.pos_encoding == "sinusoidal" else "learned"
    heatmap = figures.encoding_heatmap(table, f"{kind.capitalize()} positional encoding: positions × dimensions")
    similarity = figures.position_similarity(table[:60], "Dot product between position encodings")
    return heatmap, positional_curves(model, dimensions), similarity


def positional_norms(model: Transformer, translation: Translation) -> go.Figure:
    """For the current input: the size of the scaled token embedding and of the positional vector."""
    ids = torch.tensor(translation.src_ids, device=model.device)
    with torch.inference_mode():
        token_norms = model.src_embed(ids[None])[0].norm(dim=-1).float().cpu().numpy()
        position_norms = model.positions(0, len(ids)).norm(dim=-1).float().cpu().numpy()
    return figures.positional_vs_token_norms(token_norms, position_norms, translation.src_tokens,
                                             "This input: size of the token and positional parts")


def model_card(model: Transformer, metrics: dict | None, translation: Translation | None) -> tuple[str, pd.DataFrame]:
    config = model.config
    counted, closed_form = model.num_parameters(), expected_parameter_count(config)
    check = "✓ matches" if counted == closed_form else "✗ differs from"
    lines = [f"**{counted:,} trainable parameters** — {check} the closed-form count {closed_form:,}.",
             f"{config.n_layers} encoder + {config.n_layers} decoder layers, d_model {config.d_model}, {config.n_heads} heads "
             f"of size {config.head_dim}, feed-forward {config.d_ff}, {config.norm}-norm, {config.pos_encoding} positions, "
             f"vocabulary {config.tgt_vocab_size:,}{', shared embeddings' if config.share_embeddings else ''}"
             f"{', output tied to the target embedding' if config.tie_output else ''}."]
    if metrics:
        training, scores = metrics.get("training", {}), metrics.get("scores", {})
        lines.append(f"Trained {training.get('epochs_run', '?')} epochs ({training.get('updates', '?')} updates) in "
                     f"{training.get('wall_minutes', '?')} min on {training.get('hardware', '?')}.")
        for split, s in scores.items():
            lines.append(f"- **{split}**: BLEU {s['bleu']}, chrF {s['chrf']} ({s['sentences']} sentences) — `{s['bleu_signature']}`")
    src_ids = translation.src_ids if translation else [4, 5, 3]
    decoder_input = ([2] + translation.tgt_ids[:-1]) if translation else [2, 4]
    table = pd.DataFrame(architecture_rows(model, src_ids, decoder_input))
    return "\n\n".join(lines), table


EXPORT_ROOT = Path(tempfile.gettempdir()) / "attention-explorer-exports"
EXPORT_MAX_AGE_S = 3600


def export_files(result: RunResult) -> list[str]:
    """Writes the JSON and CSV files into a fresh folder; folders older than an hour are removed, so a
    long-running server does not fill its disk (Gradio serves its own copies of the files)."""
    EXPORT_ROOT.mkdir(exist_ok=True)
    now = time.time()
    for old in EXPORT_ROOT.iterdir():
        if now - old.stat().st_mtime > EXPORT_MAX_AGE_S:
            shutil.rmtree(old, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(dir=EXPORT_ROOT))
    files = {"translation.json": to_json(result.translations), "steps.csv": steps_csv(result.translations),
             "attention.csv": attention_csv(result.translations)}
    for name, content in files.items():
        (folder / name).write_text(content, encoding="utf-8")
    return [str(folder / name) for name in files]


def details_json(result: RunResult) -> dict:
    """Everything behind the plots, for API callers."""
    return {"model": result.model_key, "device": result.device, "milliseconds": round(result.milliseconds, 1),
            "notices": result.notices, **json.loads(to_json(result.translations))}
