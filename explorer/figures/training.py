"""How a model learned: train loss and val BLEU per epoch, with the epoch being looked at marked."""
from __future__ import annotations

import plotly.graph_objects as go

from .theme import ACCENT, MUTED, base_layout


def training_curves(epochs: list[int], train_loss: list[float], val_bleu: list[float], current: int,
                    title: str, stage_starts: list[tuple[int, str]] = ()) -> go.Figure:
    """`stage_starts`: (first epoch, name) of each stage after the first, drawn as a boundary: a new stage's data
    or learning rate moves the loss at once, and the curves should say why."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=epochs, y=train_loss, name="train loss (per token)", mode="lines+markers",
                                line={"color": MUTED}, hovertemplate="epoch %{x}: loss %{y:.3f}<extra></extra>"))
    figure.add_trace(go.Scatter(x=epochs, y=val_bleu, name="val BLEU (greedy)", mode="lines+markers", yaxis="y2",
                                line={"color": ACCENT}, hovertemplate="epoch %{x}: BLEU %{y:.2f}<extra></extra>"))
    for first_epoch, name in stage_starts:
        figure.add_vline(x=first_epoch - 0.5, line_color="#d1d5db", line_width=2, annotation_text=name,
                         annotation_position="bottom right", annotation_font_color=MUTED)
    figure.add_vline(x=current, line_dash="dot", line_color="#9ca3af")
    figure.update_xaxes(title={"text": "epoch"})
    return base_layout(
        figure,
        title,
        height=300,
        legend={"orientation": "h", "y": -0.3},
        yaxis={"title": {"text": "train loss"}},
        yaxis2={"title": {"text": "val BLEU"}, "overlaying": "y", "side": "right", "rangemode": "tozero"},
    )
