"""Closed-form parameter count of a ModelConfig, derived by hand from the architecture."""
from __future__ import annotations

from .config import ModelConfig


def expected_parameter_count(config: ModelConfig) -> int:
    d = config.d_model
    attention = 4 * (d * d + d)  # Q, K, V and output projections, each with a bias, whatever the head count

    def feed_forward(ff: int) -> int:
        return (d * ff + ff) + (ff * d + d)

    layer_norm = 2 * d  # gain and bias
    encoder_layer = attention + feed_forward(config.encoder.d_ff) + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward(config.decoder.d_ff) + 3 * layer_norm
    final_norms = 2 * layer_norm if config.final_norm else 0
    embeddings = config.src_vocab_size * d + (0 if config.share_embeddings else config.tgt_vocab_size * d)
    positions = config.max_len * d if config.pos_encoding == "learned" else 0
    output = (0 if config.tie_output else d * config.tgt_vocab_size) + config.tgt_vocab_size
    layers = config.encoder.layers * encoder_layer + config.decoder.layers * decoder_layer
    return layers + final_norms + embeddings + positions + output
