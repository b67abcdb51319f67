"""The Cause tab's figures: the restored share of each patched site as heatmaps, hover naming the number and what
was patched, each cell carrying the `hold` text (explorer/patch_api.py's form) that decodes with it held; and the
cells where attribution patching's estimate disagrees with the exact share, as rows and as a table."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from transformer.core.head_ref import shown

from .theme import base_layout, label, unique_labels

SITE_TITLES = {
    "residual": "Residual stream after the layer", "attention": "Self-attention output",
    "feed_forward": "Feed-forward output", "cross": "Cross-attention heads", "encoder_self": "Encoder self-attention "
    "heads", "decoder_self": "Decoder self-attention heads", "cross_keys_values": "Cross-attention reading the clean "
    "memory (keys and values only)",
}
SHARE_SCALE = "RdBu"  # diverging: blue restores the clean prediction, red pushes further from it; white is none


def stacked(grids: list, columns: list[list[str]], holds: list[list[list[str]]], hovers: list[list[list[str]]],
            title: str, row_height: int) -> go.Figure:
    """One heatmap per grid, stacked, on one colour scale centred at 0."""
    figure = make_subplots(rows=len(grids), cols=1, subplot_titles=[label(SITE_TITLES[g.site]) for g in grids],
                           vertical_spacing=0.5 / max(len(grids), 1))
    for row, (grid, x, hold, hover) in enumerate(zip(grids, columns, holds, hovers), start=1):
        shares = np.where(np.isnan(grid.shares), None, np.round(grid.shares, 3))
        figure.add_trace(go.Heatmap(
            z=shares, x=x, y=[f"layer {shown(layer)}" for layer in range(grid.shares.shape[0])], customdata=hold,
            text=hover, zmid=0, zmin=-1, zmax=1, colorscale=SHARE_SCALE, showscale=row == 1,
            colorbar={"title": {"text": "restored share"}, "thickness": 10, "len": 0.5, "y": 1, "yanchor": "top"},
            hovertemplate="%{text}<br>restored share %{z}<extra></extra>", xgap=1, ygap=1), row=row, col=1)
        figure.update_yaxes(autorange="reversed", type="category", row=row, col=1)
        figure.update_xaxes(type="category", tickangle=-45, row=row, col=1)
    return base_layout(figure, title, height=80 + sum(row_height * g.shares.shape[0] + 90 for g in grids))


def trace_figure(grids: list, pieces: list[str]) -> go.Figure:
    """The encoder trace: a layer x source position heatmap per site kind."""
    x = unique_labels(pieces)
    holds, hovers = [], []
    for grid in grids:
        layers = grid.shares.shape[0]
        holds.append([[f"trace {grid.site} {shown(layer)} {i + 1}" for i in range(len(pieces))]
                      for layer in range(layers)])
        hovers.append([[f"patched: {SITE_TITLES[grid.site].lower()}, layer {shown(layer)}, position {i + 1} "
                        f"({label(piece)})" for i, piece in enumerate(pieces)] for layer in range(layers)])
    return stacked(grids, [x] * len(grids), holds, hovers, "Which encoder layer and position carries it "
                   "(click a cell to decode with it held)", 26)


def heads_figure(grids: list) -> go.Figure:
    """Head patching, cross-attention first, then path patching: a layer x head matrix each."""
    columns, holds, hovers = [], [], []
    for grid in grids:
        layers, heads = grid.shares.shape
        kind = "path cross" if grid.analysis == "path" else f"heads {grid.site}"
        columns.append([f"head {shown(h)}" for h in range(heads)])
        holds.append([[f"{kind} {shown(layer)} {shown(h)}" for h in range(heads)] for layer in range(layers)])
        hovers.append([[f"patched: {SITE_TITLES[grid.site].lower()}, layer {shown(layer)}, head {shown(h)}"
                        for h in range(heads)] for layer in range(layers)])
    return stacked(grids, columns, holds, hovers, "Which head moves it (click a cell to decode with it held)", 30)


DISAGREEMENT_COLUMNS = ["picture", "layer", "position or head", "exact share", "estimate", "estimate − exact"]


def disagreement_rows(disagreements: list[dict], pieces: list[str]) -> list[list]:
    """The cells where attribution patching's estimate and the exact share differ (analysis/causal/estimate.py's
    `agreement`, counted from 1), the largest difference first, as rows of DISAGREEMENT_COLUMNS; `pieces` are the
    clean source's, naming the trace's positions. Plain text: the page's table shows it as such."""
    rows = []
    for cell in sorted(disagreements, key=lambda c: -abs(c["estimate"] - c["exact"])):
        where = (f"position {cell['position']} ({pieces[cell['position'] - 1]})" if "position" in cell
                 else f"head {cell['head']}")
        exact, estimated = cell["exact"], cell["estimate"]
        rows.append([SITE_TITLES[cell["site"]], cell["layer"], where, round(exact, 3), round(estimated, 3),
                     round(estimated - exact, 3)])
    return rows


def disagreements_table(rows: list[list]) -> go.Figure:
    """The rows as a table, for the saved file (the page shows them in a table component of its own); pieces shown
    as text, never markup."""
    columns = [[label(v) if isinstance(v, str) else v for v in column] for column in zip(*rows)] if rows else [
        [] for _ in DISAGREEMENT_COLUMNS]
    figure = go.Figure(go.Table(header={"values": DISAGREEMENT_COLUMNS}, cells={"values": columns}))
    return base_layout(figure, "Where attribution patching disagrees with the exact share",
                       height=120 + 28 * len(rows))


__all__ = ["DISAGREEMENT_COLUMNS", "disagreement_rows", "disagreements_table", "heads_figure", "trace_figure"]
