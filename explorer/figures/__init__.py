"""Pure functions from recorded data (numpy arrays, token lists) to plotly figures.

They never touch a model: the app calls them on stored results, so re-plotting never re-runs decoding.
"""
from .attention import attention_heatmap, tiled_heatmap
from .playground import attention_tiles, learning_curve
from .positional import (
    encoding_curves,
    encoding_heatmap,
    position_similarity,
    positional_vs_token_norms,
    relative_bias_curves,
    relative_bias_heatmap,
)
from .steps import candidates_bar, source_attention_bar
from .training import training_curves

__all__ = [
    "attention_heatmap", "attention_tiles", "candidates_bar", "encoding_curves", "encoding_heatmap", "learning_curve",
    "position_similarity",
    "positional_vs_token_norms", "relative_bias_curves", "relative_bias_heatmap", "source_attention_bar",
    "tiled_heatmap", "training_curves",
]
