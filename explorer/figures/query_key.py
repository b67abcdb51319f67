"""One attention weight taken apart: the query and key vectors, their elementwise products, the scores and the
weights, for one head and one query (analysis/query_key.py holds the numbers)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .theme import ACCENT, MUTED, base_layout, rounded, unique_labels


def query_key_figure(breakdown, query_label: str, key_labels: list[str], title: str) -> go.Figure:
    """Four panels sharing the keys as rows: q and each k (q on top), q ⊙ k coloured by sign, the scaled score
    and the weight after the softmax."""
    keys = unique_labels(key_labels)
    dims = list(range(1, breakdown.query_vector.size + 1))
    figure = make_subplots(
        rows=2,
        cols=4,
        shared_xaxes="columns",
        row_heights=[0.12, 0.88],
        column_widths=[0.34, 0.34, 0.16, 0.16],
        horizontal_spacing=0.03,
        vertical_spacing=0.04,
        subplot_titles=("query q", "q ⊙ k (sums to the score)", "", "", "keys k", "", "score q·k/√d", "weight"),
    )
    scale = float(np.abs(breakdown.key_vectors).max() or 1)
    product_scale = float(np.abs(breakdown.products).max() or 1)
    vector = dict(colorscale="RdBu", zmid=0, showscale=False, x=dims)
    figure.add_trace(go.Heatmap(z=rounded(breakdown.query_vector[None]), y=[query_label], zmin=-scale, zmax=scale,
                                hovertemplate="q[%{x}] = %{z:.3f}<extra></extra>", **vector), 1, 1)
    figure.add_trace(go.Heatmap(z=rounded(breakdown.key_vectors), y=keys, zmin=-scale, zmax=scale,
                                hovertemplate="%{y}: k[%{x}] = %{z:.3f}<extra></extra>", **vector), 2, 1)
    figure.add_trace(go.Heatmap(z=rounded(breakdown.products), y=keys, zmin=-product_scale, zmax=product_scale,
                                hovertemplate="%{y}: q[%{x}]·k[%{x}] = %{z:.3f}<extra></extra>", **vector), 2, 2)
    strongest = int(np.argmax(breakdown.weights))
    colours = [ACCENT if j == strongest else MUTED for j in range(len(keys))]
    figure.add_trace(go.Bar(x=rounded(breakdown.scores).tolist(), y=keys, orientation="h", marker_color=colours,
                            hovertemplate="%{y}: score %{x:.3f}<extra></extra>"), 2, 3)
    figure.add_trace(go.Bar(x=rounded(breakdown.weights).tolist(), y=keys, orientation="h", marker_color=colours,
                            hovertemplate="%{y}: weight %{x:.3f}<extra></extra>"), 2, 4)
    for column in (1, 2, 3, 4):
        figure.update_yaxes(autorange="reversed", row=2, col=column, showticklabels=column == 1)
    figure.update_xaxes(title={"text": "dimension"}, row=2, col=1)
    figure.update_xaxes(title={"text": "dimension"}, row=2, col=2)
    figure.update_xaxes(range=[0, 1], row=2, col=4)
    return base_layout(figure, title, height=160 + 22 * len(keys), showlegend=False)
