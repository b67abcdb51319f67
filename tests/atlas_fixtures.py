"""Tiny checkpoints and corpora for the atlas tests, made in the test session."""
from __future__ import annotations

import math
from pathlib import Path

import torch

from transformer import Tokenizer, Transformer
from transformer.checkpoint import save_checkpoint

from .conftest import tiny_config

SENTENCES = 48  # pairs in the tiny atlases: ~1,000 tokens a side, built in about a second


def tiny_checkpoint(folder: Path, tokenizer_file: Path, seed: int = 0, **overrides) -> Path:
    torch.manual_seed(seed)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    model = Transformer(tiny_config(vocab, share_embeddings=True, tie_output=True, **overrides))
    return save_checkpoint(folder, model, tokenizer_file)


def planted_previous_token_checkpoint(folder: Path, tokenizer_file: Path) -> Path:
    """A model whose encoder self-attention head (layer 1, head 1) attends to the previous token, by construction:
    post-norm, so the first layer's attention reads the raw input; learned positions put (cos θp, sin θp) in
    features 0 and 1, which no token embedding touches; the head's query reads them as they are and its key turns
    them on by θ. So q at position t equals k at position t - 1, and the score q_t·k_s = A² cos(θ(t - s - 1)) peaks
    at s = t - 1."""
    torch.manual_seed(0)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    model = Transformer(tiny_config(vocab, share_embeddings=True, tie_output=True, norm="post", final_norm=False,
                                    pos_encoding="learned", n_heads=2))
    theta, radius, width = 2 * math.pi / 24, 4.0, model.config.d_model
    with torch.no_grad():
        model.src_embed.embedding.weight[:, :2] = 0
        table = model.positions.embedding.weight
        table.zero_()
        angles = theta * torch.arange(table.size(0), dtype=torch.float32)
        table[:, 0], table[:, 1] = radius * angles.cos(), radius * angles.sin()
        attention = model.encoder_layers[0].self_attention
        head_size = model.config.encoder.head_dim
        weight, bias = attention.in_proj.weight, attention.in_proj.bias
        weight[:head_size], bias[:head_size] = 0, 0  # head 1's query rows
        weight[width : width + head_size], bias[width : width + head_size] = 0, 0  # head 1's key rows
        weight[0, 0] = weight[1, 1] = 1.0
        rotation = torch.tensor([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
        weight[width : width + 2, :2] = rotation
    return save_checkpoint(folder, model, tokenizer_file)
