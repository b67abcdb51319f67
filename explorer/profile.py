"""Everything the views need from a model that does not depend on the visitor's sentence, computed once
when the model loads, so that rendering never runs the model."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from transformer import Translator, expected_parameter_count
from transformer.checkpoint import WEIGHTS_FILE
from transformer.core.architecture import architecture_rows
from transformer.training.timeline import Timeline

POSITIONS_SHOWN = 100  # rows of the positional table the views draw
DISTANCES_SHOWN = 40  # T5's relative bias drawn for key - query distances -40..40 (the decoder's: -40..0)
EXAMPLE_SOURCE = [4, 5]  # two ordinary pieces, then </s>: the architecture table's example input
EXAMPLE_DECODER_INPUT = [4]  # after the decoder's start token (<s>; <pad> in Marian models), one piece


@dataclass
class ModelProfile:
    config: object  # ModelConfig
    parameters: int
    closed_form_parameters: int
    architecture: list[dict]  # one row per module: name, type, output shape on the example, parameters
    positional_table: np.ndarray  # (POSITIONS_SHOWN, D) float32, sinusoidal or learned (zeros: T5's relative)
    relative_bias: dict | None  # T5: side -> (H, distances) its stack's bias, and "distances"; None for the others
    position_norms: np.ndarray  # (max_len,) size of each position's vector
    token_norms: np.ndarray  # (V,) size of each source token's scaled embedding
    metrics: dict | None
    timeline: Timeline | None  # attention across training, when the checkpoint ships one
    head_importance: dict | None  # head_importance.json, when `python -m transformer.analysis.importance` wrote one
    alignment: dict | None  # alignment.json, when `python -m transformer.analysis.alignment_eval` wrote one
    split_head_stats: dict | None  # head_stats.json: per-head statistics over val (analysis/corpus_stats.py)
    faithfulness: dict | None = (
        None  # faithfulness.json: the deletion test of each attribution (analysis/faithfulness.py)
    )
    weights_file: Path | None = None  # model.safetensors, hashed on first use (an export), not at start-up

    @cached_property
    def weights_sha256(self) -> str | None:
        """Of model.safetensors: which weights an export came from."""
        return file_sha256(self.weights_file) if self.weights_file else None

    def source_norms(self, src_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """For one input: (size of each scaled token embedding, size of each positional vector)."""
        return self.token_norms[src_ids], self.position_norms[: len(src_ids)]


def relative_bias(model) -> dict | None:
    """Each stack's relative position bias by key - query distance, (H, distances), read from queries at position
    DISTANCES_SHOWN over keys around them; None for a model with absolute positions."""
    if model.encoder_position_bias is None:
        return None
    shown = DISTANCES_SHOWN
    encoder = model.encoder_position_bias(shown, 1, 2 * shown + 1)[0, :, 0]  # (H, 2 shown + 1): -shown..shown
    decoder = model.decoder_position_bias(shown, 1, shown + 1)[0, :, 0]  # (H, shown + 1): -shown..0
    return {"encoder": encoder.float().cpu().numpy(), "decoder": decoder.float().cpu().numpy(),
            "distances": np.arange(-shown, shown + 1)}


@torch.inference_mode()
def profile_model(translator: Translator) -> ModelProfile:
    model = translator.model
    table = model.positions.table.detach().float().cpu()
    return ModelProfile(
        config=model.config,
        parameters=model.num_parameters(),
        closed_form_parameters=expected_parameter_count(model.config),
        architecture=architecture_rows(model, EXAMPLE_SOURCE + [model.config.eos_id],
                                       [model.config.decoder_start_id] + EXAMPLE_DECODER_INPUT),
        positional_table=table[:POSITIONS_SHOWN].numpy(),
        relative_bias=relative_bias(model),
        position_norms=table.norm(dim=-1).numpy(),
        token_norms=(model.src_embed.weight.detach().float().cpu().norm(dim=-1) * model.src_embed.scale).numpy(),
        metrics=translator.metrics,
        timeline=Timeline.load(translator.source) if translator.source else None,
        head_importance=read_json_file(translator.source / "head_importance.json") if translator.source else None,
        alignment=read_json_file(translator.source / "alignment.json") if translator.source else None,
        split_head_stats=read_json_file(translator.source / "head_stats.json") if translator.source else None,
        faithfulness=read_json_file(translator.source / "faithfulness.json") if translator.source else None,
        weights_file=translator.source / WEIGHTS_FILE if translator.source else None,
    )


def read_json_file(path: Path) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as weights:
        for block in iter(lambda: weights.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
