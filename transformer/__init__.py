"""A from-scratch encoder-decoder Transformer whose attention can be watched.

text -> tokenizer -> model (encode, decode step by step) -> recorded attention and steps -> figures
"""
from .capture import AttentionRecord, capture_attention
from .config import ModelConfig
from .model import Transformer
from .params import expected_parameter_count
from .tokenizer import Tokenizer
from .translator import Translation, Translator

__all__ = [
    "AttentionRecord", "ModelConfig", "Tokenizer", "Transformer", "Translation", "Translator",
    "capture_attention", "expected_parameter_count",
]
