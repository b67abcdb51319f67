"""What causes this word: activation patching across the encoder-decoder (Meng et al., 2022; Wang et al., 2023;
Heimersheim and Nanda, 2024), through the points the model records (core/patching.py).

    question.py   the clean and corrupted sources, the target piece, position alignment, ROME's noise
    exact.py      causal tracing of the encoder, head patching, path patching through cross-attention: batched
    estimate.py   attribution patching, and how far it agrees with the exact pictures
    analysis.py   the result, its JSON, and the registered analysis ("patching")
    cli.py        python -m transformer.analysis patch ...
"""
from .analysis import ANALYSES, ANALYSIS, Patching, causal_patching, patching_json, question_of
from .exact import Grid
from .question import Question, aligned_positions, embedding_noise_scale, replaced_source, same_count_suggestions

__all__ = ["ANALYSES", "ANALYSIS", "Grid", "Patching", "Question", "aligned_positions", "causal_patching",
           "embedding_noise_scale", "patching_json", "question_of", "replaced_source", "same_count_suggestions"]
