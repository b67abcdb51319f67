"""One decoding step: the candidates the model weighed, and where it looked in the source."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .theme import ACCENT, MUTED, base_layout, label, rounded


def candidates_bar(topk: list[tuple[str, float]], chosen: str, title: str) -> go.Figure:
    """Top-k next-token candidates, most probable on top; the chosen token is highlighted."""
    tokens = [label(t) for t, _ in topk]
    probs = [round(float(p), 4) for _, p in topk]
    colors = [ACCENT if t == chosen else MUTED for t, _ in topk]
    positions = list(range(len(topk)))
    figure = go.Figure(go.Bar(
        x=probs, y=positions, orientation="h", marker_color=colors, text=[f"{p:.1%}" for p in probs],
        textposition="outside", cliponaxis=False, customdata=tokens,
        hovertemplate="%{customdata}: %{x:.2%}<extra></extra>",
    ))
    figure.update_yaxes(tickmode="array", tickvals=positions,
                        ticktext=[f"<b>{t}</b> ◀ chosen" if c == ACCENT else t for t, c in zip(tokens, colors)],
                        autorange="reversed")
    figure.update_xaxes(range=[0, max(probs + [0.01]) * 1.25], tickformat=".0%", title={"text": "probability"})
    return base_layout(figure, title, height=120 + 26 * len(topk))


def source_attention_bar(weights: np.ndarray, source_labels: list[str], title: str) -> go.Figure:
    """One query's cross-attention over the source tokens (a row of the cross-attention matrix)."""
    weights = rounded(weights)
    positions = list(range(len(source_labels)))
    figure = go.Figure(go.Bar(
        x=positions, y=weights, marker_color=MUTED, customdata=[label(s) for s in source_labels],
        hovertemplate="%{customdata}: %{y:.3f}<extra></extra>",
    ))
    figure.update_xaxes(tickmode="array", tickvals=positions, ticktext=[label(s) for s in source_labels],
                        tickangle=-60, title={"text": "source token (key)"})
    figure.update_yaxes(range=[0, 1], title={"text": "attention weight"})
    return base_layout(figure, title, height=300)


def contrast_bar(source_scores: np.ndarray, source_labels: list[str], prefix_scores: np.ndarray,
                 prefix_labels: list[str], title: str, layers=None) -> go.Figure:
    """Why X and not Y: each input's push on the log-odds, source pieces then the decoder inputs so far; bars
    right of zero favour X, left of zero Y. `layers`: (source, prefix) ALTI-Logit shares of the same log-odds,
    drawn as a second bar beside each input's."""
    labels = [f"{label(s)} (source)" for s in source_labels] + [f"{label(p)} (so far)" for p in prefix_labels]
    scores = rounded(np.concatenate([source_scores, prefix_scores]))
    positions = list(range(len(labels)))
    colours = [MUTED] * len(source_labels) + [ACCENT] * len(prefix_labels)
    figure = go.Figure(
        go.Bar(
            x=scores,
            y=positions,
            orientation="h",
            marker_color=colours,
            customdata=labels,
            name="input × gradient",
            hovertemplate="%{customdata}: %{x:+.3f}<extra>input × gradient</extra>",
        )
    )
    if layers is not None:
        figure.add_trace(go.Bar(x=rounded(np.concatenate(layers)), y=positions, orientation="h", customdata=labels,
                                name="ALTI-Logit (through the layers)", marker_color=colours, marker_pattern_shape="/",
                                hovertemplate="%{customdata}: %{x:+.3f}<extra>ALTI-Logit</extra>"))
        figure.update_layout(barmode="group", showlegend=True, legend={"orientation": "h", "y": -0.15})
    figure.update_yaxes(tickmode="array", tickvals=positions, ticktext=labels, autorange="reversed")
    figure.update_xaxes(zeroline=True, title={"text": "push on log p(X) − log p(Y)"})
    return base_layout(figure, title, height=140 + (36 if layers is not None else 22) * len(labels))
