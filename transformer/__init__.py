"""A from-scratch encoder-decoder Transformer whose insides can be watched.

text -> tokenizer -> core (the model, and what it can record) -> decoding (strategies, the trace) -> your views

    transformer.core       the model: config, attention, layers, positions, probes and recording
    transformer.decoding   strategies (a registry), the step-by-step decoder, Translator and its Translation trace
    transformer.training   data, the training loop and CLI, evaluation, averaging, model cards
    transformer.analysis   head statistics and roles, attention rollout, input x gradient, word alignments
"""
from .core import ModelConfig, Replace, Transformer, capture_attention, expected_parameter_count, patch, record
from .core.capture import AttentionRecord
from .decoding import Translation, Translator
from .tokenizer import Tokenizer

__all__ = [
    "AttentionRecord", "ModelConfig", "Replace", "Tokenizer", "Transformer", "Translation", "Translator",
    "capture_attention", "expected_parameter_count", "patch", "record",
]
