"""Attention heatmaps: rows are queries, columns are keys, both labelled with the real tokens.

Several heads (or layers x heads) go into ONE heatmap with NaN gaps between tiles: a single trace
draws several times faster in the browser than dozens of subplots. Axes are categorical, one label per
row / column (made unique by `unique_labels`), so hovering names the query and key without a text
string per cell.
"""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from .theme import ATTENTION_COLORS, base_layout, label, rounded, unique_labels

HOVER = "query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"


def _heatmap(z: np.ndarray, x: list[str], y: list[str]) -> go.Heatmap:
    return go.Heatmap(z=z, x=x, y=y, zmin=0.0, zmax=float(max(np.nanmax(z), 1e-6)), colorscale=ATTENTION_COLORS,
                      hovertemplate=HOVER, hoverongaps=False, colorbar={"title": {"text": "weight"}, "thickness": 12})


def attention_heatmap(weights: np.ndarray, row_labels: list[str], col_labels: list[str], title: str,
                      row_title: str = "query", col_title: str = "key") -> go.Figure:
    """One (rows, cols) matrix of attention weights."""
    figure = go.Figure(_heatmap(rounded(weights), unique_labels(col_labels), unique_labels(row_labels)))
    # every token gets its label: on a narrow screen the plot scrolls (style.css) instead of dropping some
    figure.update_xaxes(type="category", tickangle=-60, dtick=1, title={"text": label(col_title)})  # "<s>" as text
    figure.update_yaxes(type="category", autorange="reversed", dtick=1, title={"text": label(row_title)})
    return base_layout(figure, title, height=max(320, 140 + 22 * len(row_labels)))


def tiled_heatmap(tiles: list[np.ndarray], tile_titles: list[str], columns: int, row_labels: list[str],
                  col_labels: list[str], title: str, show_token_ticks: bool = True,
                  row_group_titles: list[str] | None = None, col_group_titles: list[str] | None = None) -> go.Figure:
    """Equal-shaped (rows, cols) matrices in a grid of `columns` tiles per row, drawn as one heatmap.

    Without token ticks (the dense overview) the hover labels carry the tile's row / column group
    (e.g. layer and head) in front of the token."""
    n_rows, n_cols = tiles[0].shape
    grid_rows = math.ceil(len(tiles) / columns)
    gap = 1
    canvas = np.full((grid_rows * (n_rows + gap) - gap, columns * (n_cols + gap) - gap), np.nan, dtype=np.float32)
    annotations = []
    for index, (tile, tile_title) in enumerate(zip(tiles, tile_titles)):
        top, left = (index // columns) * (n_rows + gap), (index % columns) * (n_cols + gap)
        canvas[top : top + n_rows, left : left + n_cols] = rounded(tile)
        # on a category axis a number is a category index, so tile titles can sit by position
        annotations.append({"x": left + (n_cols - 1) / 2, "y": top - 0.5, "text": tile_title, "showarrow": False,
                            "yanchor": "bottom", "xref": "x", "yref": "y", "font": {"size": 11}})

    def axis(labels: list[str], groups: int, group_titles: list[str] | None) -> list[str]:
        tokens = []
        for g in range(groups):
            prefix = f"{group_titles[g]} · " if group_titles else ""
            tokens += [prefix + t for t in labels] + ([""] * gap if g < groups - 1 else [])
        return unique_labels(tokens)

    x = axis(col_labels, columns, col_group_titles)
    y = axis(row_labels, grid_rows, row_group_titles)
    figure = go.Figure(_heatmap(canvas, x, y))
    figure.update_xaxes(type="category", showticklabels=show_token_ticks, tickangle=-60, showgrid=False)
    figure.update_yaxes(type="category", showticklabels=show_token_ticks, autorange="reversed", showgrid=False)
    figure.update_layout(annotations=annotations)
    tile_height = max(90, 16 * n_rows) if show_token_ticks else max(60, 8 * n_rows)
    return base_layout(figure, title, height=min(1400, 120 + grid_rows * (tile_height + 24)))
