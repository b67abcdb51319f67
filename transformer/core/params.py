"""Closed-form parameter count of a ModelConfig, derived by hand from the architecture."""
from __future__ import annotations

from .config import ModelConfig


def expected_parameter_count(config: ModelConfig) -> int:
    d = config.d_model
    norm = d if config.norm_kind == "rms" else 2 * d  # a gain, and a bias unless an RMS norm (T5)

    def attention(inner: int) -> int:  # Q, K and V (D -> inner each) and the output (inner -> D), each with a bias
        return 3 * (d * inner + inner) + (inner * d + d)

    def feed_forward(ff: int) -> int:  # W1 (and the gate's, gated), W2, with biases
        return (2 if config.gated_ff else 1) * (d * ff + ff) + (ff * d + d)

    encoder, decoder = config.encoder, config.decoder
    encoder_layer = attention(encoder.heads * encoder.head_dim) + feed_forward(encoder.d_ff) + 2 * norm
    decoder_layer = 2 * attention(decoder.heads * decoder.head_dim) + feed_forward(decoder.d_ff) + 3 * norm
    final_norms = 2 * norm if config.final_norm else 0
    embedding_norms = 2 * norm if config.embedding_norm else 0
    embeddings = config.src_vocab_size * d + (0 if config.share_embeddings else config.tgt_vocab_size * d)
    tables = 2 if config.decoder_positions else 1
    positions = tables * (config.max_len + config.position_offset) * d if config.pos_encoding == "learned" else 0
    if config.pos_encoding == "relative":  # one bias table per stack: buckets x heads
        positions = config.relative_buckets * (encoder.heads + decoder.heads)
    output = (0 if config.tie_output else d * config.tgt_vocab_size) + config.tgt_vocab_size
    layers = encoder.layers * encoder_layer + decoder.layers * decoder_layer
    return layers + final_norms + embedding_norms + embeddings + positions + output
