"""Closed-form parameter count of a ModelConfig, derived by hand from the architecture."""
from __future__ import annotations

from .config import ModelConfig


def expected_parameter_count(config: ModelConfig) -> int:
    d, ff, n = config.d_model, config.d_ff, config.n_layers
    attention = 4 * (d * d + d)  # Q, K, V and output projections, each with a bias
    feed_forward = (d * ff + ff) + (ff * d + d)
    layer_norm = 2 * d  # gain and bias
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    final_norms = 2 * layer_norm if config.final_norm else 0
    embeddings = config.src_vocab_size * d + (0 if config.share_embeddings else config.tgt_vocab_size * d)
    positions = config.max_len * d if config.pos_encoding == "learned" else 0
    output = (0 if config.tie_output else d * config.tgt_vocab_size) + config.tgt_vocab_size
    return n * (encoder_layer + decoder_layer) + final_norms + embeddings + positions + output
