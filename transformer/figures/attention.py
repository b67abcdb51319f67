"""Attention heatmaps: rows are queries, columns are keys, both labelled with the real tokens.

Several heads (or layers x heads) go into ONE heatmap with NaN gaps between tiles: a single trace
draws several times faster in the browser than dozens of subplots.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from .theme import ATTENTION_COLORS, base_layout, label, rounded


def _hover_text(rows: list[str], cols: list[str], prefix: str = "") -> list[list[str]]:
    return [[f"{prefix}query {label(r)}<br>key {label(c)}" for c in cols] for r in rows]


def attention_heatmap(weights: np.ndarray, row_labels: list[str], col_labels: list[str], title: str,
                      row_title: str = "query", col_title: str = "key") -> go.Figure:
    """One (rows, cols) matrix of attention weights."""
    weights = rounded(weights)
    figure = go.Figure(go.Heatmap(
        z=weights, text=_hover_text(row_labels, col_labels), zmin=0.0, zmax=float(max(weights.max(), 1e-6)),
        colorscale=ATTENTION_COLORS, hovertemplate="%{text}<br>weight %{z:.3f}<extra></extra>",
        colorbar={"title": {"text": "weight"}, "thickness": 12},
    ))
    figure.update_xaxes(tickmode="array", tickvals=list(range(len(col_labels))), ticktext=[label(c) for c in col_labels],
                        tickangle=-60, title={"text": col_title}, side="bottom")
    figure.update_yaxes(tickmode="array", tickvals=list(range(len(row_labels))), ticktext=[label(r) for r in row_labels],
                        autorange="reversed", title={"text": row_title})
    return base_layout(figure, title, height=max(320, 140 + 22 * len(row_labels)))


def tiled_heatmap(tiles: list[np.ndarray], tile_titles: list[str], columns: int, row_labels: list[str],
                  col_labels: list[str], title: str, show_token_ticks: bool = True) -> go.Figure:
    """Equal-shaped (rows, cols) matrices in a grid of `columns` tiles per row, drawn as one heatmap."""
    n_rows, n_cols = tiles[0].shape
    grid_rows = math.ceil(len(tiles) / columns)
    gap = 1
    canvas = np.full((grid_rows * (n_rows + gap) - gap, columns * (n_cols + gap) - gap), np.nan, dtype=np.float32)
    text = [["" for _ in range(canvas.shape[1])] for _ in range(canvas.shape[0])]
    annotations = []
    for index, (tile, tile_title) in enumerate(zip(tiles, tile_titles)):
        top, left = (index // columns) * (n_rows + gap), (index % columns) * (n_cols + gap)
        canvas[top : top + n_rows, left : left + n_cols] = rounded(tile)
        for r, row_text in enumerate(_hover_text(row_labels, col_labels, prefix=f"{tile_title}<br>")):
            text[top + r][left : left + n_cols] = row_text
        annotations.append({"x": left + (n_cols - 1) / 2, "y": top - 0.5, "text": tile_title, "showarrow": False,
                            "yanchor": "bottom", "xref": "x", "yref": "y", "font": {"size": 11}})
    figure = go.Figure(go.Heatmap(
        z=canvas, text=text, zmin=0.0, zmax=float(max(np.nanmax(canvas), 1e-6)), colorscale=ATTENTION_COLORS,
        hovertemplate="%{text}<br>weight %{z:.3f}<extra></extra>", hoverongaps=False,
        colorbar={"title": {"text": "weight"}, "thickness": 12},
    ))
    if show_token_ticks:
        x_ticks = [(c + (i * (n_cols + gap)), label(col_labels[c])) for i in range(columns) for c in range(n_cols)]
        y_ticks = [(r + (i * (n_rows + gap)), label(row_labels[r])) for i in range(grid_rows) for r in range(n_rows)]
        figure.update_xaxes(tickmode="array", tickvals=[v for v, _ in x_ticks], ticktext=[t for _, t in x_ticks], tickangle=-60)
        figure.update_yaxes(tickmode="array", tickvals=[v for v, _ in y_ticks], ticktext=[t for _, t in y_ticks])
    else:
        figure.update_xaxes(showticklabels=False)
        figure.update_yaxes(showticklabels=False)
    figure.update_xaxes(showgrid=False, zeroline=False)
    figure.update_yaxes(autorange="reversed", showgrid=False, zeroline=False, scaleanchor=None)
    figure.update_layout(annotations=annotations)
    tile_height = max(90, 16 * n_rows) if show_token_ticks else max(60, 8 * n_rows)
    return base_layout(figure, title, height=min(1400, 120 + grid_rows * (tile_height + 24)))
