"""The corpus atlas's maps (transformer/atlas/maps.py): every head of one attention kind as a matrix of small maps,
and one head's map at full size, its corpus queries and keys coloured and the sentence on screen placed on it.

Input: `head_points` dicts (transformer/atlas/query.py): per part ("queries", "keys") the (n, 2) coordinates and each
point's piece, sentence and position (0-based), plus, for the open head, the hover text of each point's sentence.
"""
from __future__ import annotations

import zlib

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transformer.core.head_ref import shown

from .theme import ACCENT, MUTED, base_layout, label, rounded

PART_COLOURS = {"queries": MUTED, "keys": ACCENT}
COLOURINGS = ("query / key", "position", "piece")
MATRIX_POINTS = 400  # per head and part in the matrix: enough for its shape, light enough for 48 small maps


def thinned(count: int, most: int) -> np.ndarray:
    return np.arange(count) if count <= most else np.linspace(0, count - 1, most).astype(int)


def matrix_figure(maps: list[list[dict]], title: str, placed: list[list[dict]] | None = None) -> go.Figure:
    """maps[layer][head] -> one small map each, layers as rows and heads as columns, queries blue, keys orange;
    `placed[layer][head]`: per part, the sentence on screen's (tokens, 2) coordinates on that map, as stars."""
    layers, heads = len(maps), len(maps[0])
    titles = [f"{shown(layer)}.{shown(head)}" for layer in range(layers) for head in range(heads)]
    figure = make_subplots(rows=layers, cols=heads, horizontal_spacing=0.01, vertical_spacing=0.02,
                           subplot_titles=titles)
    for layer, row in enumerate(maps):
        for head, points in enumerate(row):
            for part in ("queries", "keys"):
                xy = points[part]["coordinates"]
                keep = thinned(len(xy), MATRIX_POINTS)
                figure.add_trace(go.Scattergl(x=rounded(xy[keep, 0]), y=rounded(xy[keep, 1]), mode="markers",
                                              marker={"size": 2, "color": PART_COLOURS[part]}, hoverinfo="skip",
                                              showlegend=False), shown(layer), shown(head))  # subplots count from 1
            for part, xy in (placed[layer][head] if placed else {}).items():
                figure.add_trace(go.Scattergl(x=rounded(xy[:, 0]), y=rounded(xy[:, 1]), mode="markers",
                                              marker={"size": 6, "symbol": "star", "color": PART_COLOURS[part],
                                                      "line": {"width": 0.5, "color": "#111"}},
                                              hoverinfo="skip", showlegend=False), shown(layer), shown(head))
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False)
    figure.update_annotations(font_size=10)
    return base_layout(figure, title, height=110 * layers + 60)


def point_colours(points: dict, part: str, colouring: str, search: str) -> dict:
    """A searched piece's points stand out in any colouring: its part's colour, the others faint grey."""
    if search.strip():
        hit = [search.strip() in piece for piece in points[part]["piece"]]
        return {"color": [PART_COLOURS[part] if h else "rgba(148,163,184,0.2)" for h in hit]}
    if colouring == "position":
        return {"color": points[part]["position"], "colorscale": "Viridis", "cmin": 0, "cmax": 30}
    if colouring == "piece":  # one hue per piece, the same on every map and in every process
        hues = [zlib.crc32(piece.encode()) % 360 for piece in points[part]["piece"]]
        return {"color": hues, "colorscale": "HSV", "cmin": 0, "cmax": 359}
    return {"color": PART_COLOURS[part]}


def head_figure(points: dict, title: str, colouring: str = COLOURINGS[0], search: str = "",
                placed: dict | None = None) -> go.Figure:
    """One head's map. Hover names each point's piece, position (from 1) and sentence. `placed`: per part, the
    sentence on screen's points {"coordinates", "piece"}, drawn as labelled stars."""
    figure = go.Figure()
    for part in ("queries", "keys"):
        data = points[part]
        hover = [f"{part[:-1]} “{label(piece)}”, position {shown(position)}<br>{label(sentence)}"
                 for piece, position, sentence in zip(data["piece"], data["position"], data["text"])]
        figure.add_trace(go.Scattergl(
            x=rounded(data["coordinates"][:, 0]), y=rounded(data["coordinates"][:, 1]), mode="markers",
            name=f"corpus {part}", text=hover, hovertemplate="%{text}<extra></extra>",
            marker={"size": 4, "opacity": 0.7, **point_colours(points, part, colouring, search)}))
    for part, data in (placed or {}).items():
        figure.add_trace(go.Scatter(
            x=rounded(data["coordinates"][:, 0]), y=rounded(data["coordinates"][:, 1]), mode="markers+text",
            name=f"this sentence's {part}", text=[label(p) for p in data["piece"]], textposition="top center",
            hovertemplate=f"this sentence's {part[:-1]} “%{{text}}”<extra></extra>",
            marker={"size": 11, "symbol": "star", "color": PART_COLOURS[part], "line": {"width": 1, "color": "#111"}}))
    figure.update_xaxes(visible=False)
    figure.update_yaxes(visible=False, scaleanchor="x")
    return base_layout(figure, title, height=460, legend={"orientation": "h", "y": -0.02})
