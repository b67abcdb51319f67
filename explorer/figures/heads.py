"""Heads at a glance: one layer x head grid per attention kind, coloured by a statistic, named by role."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.core.head_ref import head_label

from .theme import base_layout, label, rounded


def head_grid(values: np.ndarray, texts: list[list[str]], row_labels: list[str], title: str, colour_title: str,
              colorscale: str = "Viridis") -> go.Figure:
    """values (rows, H), a row per (kind, layer); texts[row][head] is written in the cell (a role, a score)."""
    layers, heads = values.shape
    figure = go.Figure(go.Heatmap(
        z=rounded(values), x=[head_label(h) for h in range(heads)], y=[label(r) for r in row_labels],
        text=[[label(t) for t in row] for row in texts], texttemplate="%{text}", textfont={"size": 10},
        colorscale=colorscale, colorbar={"title": {"text": label(colour_title)}, "thickness": 12},
        hovertemplate="%{y}, %{x}<br>" + label(colour_title) + " %{z:.3f}<br>%{text}<extra></extra>"))
    figure.update_yaxes(autorange="reversed", type="category")
    figure.update_xaxes(type="category")
    return base_layout(figure, title, height=120 + 55 * layers)
