"""The logit lens as a layer x step grid: colour is the probability each decoder layer already gives the
token finally chosen, text is that layer's own top choice, hover lists its top five."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.core.head_ref import layer_label

from .theme import ATTENTION_COLORS, base_layout, label, rounded, unique_labels


def lens_grid(chosen_prob: np.ndarray, topk, chosen_tokens: list[str], title: str, marked_step: int | None = None):
    """chosen_prob (L, T); topk[layer][step] = [(piece, probability), ...]; marked_step is 1-based."""
    layers, steps = chosen_prob.shape
    x = unique_labels([f"{t + 1}: {token}" for t, token in enumerate(chosen_tokens)])
    y = [layer_label(i) for i in range(layers)]
    text = [[label(topk[layer][t][0][0]) for t in range(steps)] for layer in range(layers)]
    hover = [["<br>".join(f"{label(p)} {q:.1%}" for p, q in topk[layer][t]) for t in range(steps)]
             for layer in range(layers)]
    figure = go.Figure(go.Heatmap(
        z=rounded(chosen_prob), x=x, y=y, zmin=0.0, zmax=1.0, colorscale=ATTENTION_COLORS, text=text,
        texttemplate="%{text}", textfont={"size": 10}, customdata=hover,
        hovertemplate="%{y}, step %{x}<br>p(final choice) %{z:.1%}<br>top 5:<br>%{customdata}<extra></extra>",
        colorbar={"title": {"text": "p(final choice)"}, "thickness": 12}))
    if marked_step is not None and 1 <= marked_step <= steps:
        figure.add_shape(type="rect", x0=marked_step - 1.5, x1=marked_step - 0.5, y0=-0.5, y1=layers - 0.5,
                         line={"color": "#f97316", "width": 3}, xref="x", yref="y")
    figure.update_xaxes(type="category", tickangle=-60, title={"text": "decoding step: the token finally chosen"})
    figure.update_yaxes(type="category", title={"text": "decoder layer"})
    return base_layout(figure, title, height=160 + 60 * layers)
