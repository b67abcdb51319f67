"""Positional encodings: the table itself, chosen dimensions as curves, position-to-position similarity,
and how large the positional part is next to the scaled token embedding of the current input."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .theme import base_layout, label, rounded


def encoding_heatmap(table: np.ndarray, title: str) -> go.Figure:
    """(positions, dimensions) matrix."""
    figure = go.Figure(go.Heatmap(
        z=rounded(table), colorscale="RdBu", zmid=0.0,
        hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>",
        colorbar={"thickness": 12},
    ))
    figure.update_xaxes(title={"text": "dimension"})
    figure.update_yaxes(title={"text": "position"}, autorange="reversed")
    return base_layout(figure, title, height=420)


def encoding_curves(table: np.ndarray, dimensions: list[int], title: str) -> go.Figure:
    """Value of chosen dimensions over positions: fast sines at low dimensions, slow ones at high."""
    figure = go.Figure()
    positions = np.arange(table.shape[0])
    for d in dimensions:
        figure.add_trace(go.Scatter(x=positions, y=rounded(table[:, d]), mode="lines",
                                    name=f"dim {d} ({'sin' if d % 2 == 0 else 'cos'})"))
    figure.update_xaxes(title={"text": "position"})
    figure.update_yaxes(title={"text": "value"})
    return base_layout(figure, title, height=340, legend={"orientation": "h", "y": -0.25})


def position_similarity(table: np.ndarray, title: str) -> go.Figure:
    """Dot products between the encodings of every pair of positions."""
    similarity = table @ table.T
    figure = go.Figure(go.Heatmap(
        z=rounded(similarity), colorscale="Viridis",
        hovertemplate="position %{y} · position %{x}<br>dot product %{z:.2f}<extra></extra>",
        colorbar={"thickness": 12},
    ))
    figure.update_xaxes(title={"text": "position"})
    figure.update_yaxes(title={"text": "position"}, autorange="reversed")
    return base_layout(figure, title, height=420)


def positional_vs_token_norms(token_norms: np.ndarray, position_norms: np.ndarray, tokens: list[str],
                              title: str) -> go.Figure:
    """L2 norm of the scaled token embedding and of the positional vector at each input position."""
    positions = list(range(len(tokens)))
    figure = go.Figure([
        go.Bar(x=positions, y=rounded(token_norms), name="token embedding × √d_model",
               customdata=[label(t) for t in tokens], hovertemplate="%{customdata}: %{y:.2f}<extra></extra>"),
        go.Bar(x=positions, y=rounded(position_norms), name="positional encoding",
               customdata=[label(t) for t in tokens], hovertemplate="%{customdata}: %{y:.2f}<extra></extra>"),
    ])
    figure.update_xaxes(tickmode="array", tickvals=positions, ticktext=[label(t) for t in tokens], tickangle=-60)
    figure.update_yaxes(title={"text": "L2 norm"})
    return base_layout(figure, title, height=340, barmode="group", legend={"orientation": "h", "y": 1.12})


def relative_bias_heatmap(bias: np.ndarray, distances: np.ndarray, title: str) -> go.Figure:
    """T5's relative position bias: heads (rows) x key - query distance (columns)."""
    figure = go.Figure(go.Heatmap(
        z=rounded(bias), x=distances[: bias.shape[1]], y=[f"head {h + 1}" for h in range(bias.shape[0])],
        colorscale="RdBu", zmid=0.0, colorbar={"thickness": 12},
        hovertemplate="%{y}<br>key − query distance %{x}<br>bias %{z:.3f}<extra></extra>",
    ))
    figure.update_xaxes(title={"text": "key position − query position"})
    figure.update_yaxes(autorange="reversed")
    return base_layout(figure, title, height=420)


def relative_bias_curves(bias: np.ndarray, distances: np.ndarray, title: str) -> go.Figure:
    """Each head's bias over the distance, one line per head."""
    figure = go.Figure([go.Scatter(x=distances, y=rounded(row), mode="lines", name=f"head {h + 1}")
                        for h, row in enumerate(bias)])
    figure.update_xaxes(title={"text": "key position − query position"})
    figure.update_yaxes(title={"text": "bias added to the score"})
    return base_layout(figure, title, height=340, legend={"orientation": "h", "y": -0.25})
