"""The Learn tab's figures: the training curve (every update's loss, the held-out exact match at each snapshot) and
one snapshot's attention, every layer and head of the three kinds in ONE heatmap (tiles with NaN gaps, as
figures/attention.py does it: one trace draws far faster than dozens of subplots)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.core.head_ref import shown

from .theme import ACCENT, ATTENTION_COLORS, MUTED, base_layout, label, rounded

KIND_NAMES = {"encoder_self": "encoder self", "decoder_self": "decoder self", "cross": "cross"}
SHORT_NAMES = {"encoder_self": "enc-self", "decoder_self": "dec-self", "cross": "cross"}  # tile titles fit a phone


def learning_curve(loss_steps: list[int], losses: list[float], steps: list[int], accuracies: list[float], title: str,
                   marked: int | None = None) -> go.Figure:
    """The training loss (log scale) at `loss_steps` and the exact match at each snapshot's step; `marked`: the step
    the replay shows."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=loss_steps, y=losses, name="training loss", mode="lines",
                                line={"color": MUTED, "width": 1.5},
                                hovertemplate="step %{x}: loss %{y:.3f}<extra></extra>"))
    figure.add_trace(go.Scatter(x=steps, y=[100 * a for a in accuracies], name="exact match, held out (%)",
                                mode="lines+markers", yaxis="y2", line={"color": ACCENT},
                                hovertemplate="step %{x}: %{y:.1f}% exact<extra></extra>"))
    if marked is not None:
        figure.add_vline(x=marked, line_dash="dot", line_color="#9ca3af")
    figure.update_xaxes(title={"text": "update (step)"}, rangemode="tozero")
    return base_layout(figure, title, height=280, legend={"orientation": "h", "y": -0.35},
                       yaxis={"title": {"text": "loss"}, "type": "log"},
                       yaxis2={"title": {"text": "exact match %"}, "overlaying": "y", "side": "right",
                               "range": [0, 101]})


def attention_tiles(attention: dict[str, np.ndarray], labels: dict[str, tuple[list[str], list[str]]],
                    title: str) -> go.Figure:
    """`attention`: kind -> (L, H, rows, cols); `labels`: kind -> (row pieces, column pieces). A band of L rows of H
    tiles per kind, every tile padded to the largest tile's shape; hovering names the kind, layer, head, query,
    key and weight."""
    kinds = [kind for kind in KIND_NAMES if kind in attention]
    layers, heads = attention[kinds[0]].shape[:2]
    tile_rows = max(attention[k].shape[2] for k in kinds)
    tile_cols = max(attention[k].shape[3] for k in kinds)
    gap, grid_rows = 1, len(kinds) * layers
    shape = (grid_rows * (tile_rows + gap) - gap, heads * (tile_cols + gap) - gap)
    canvas = np.full(shape, np.nan, dtype=np.float32)
    hover = np.full(shape, "", dtype=object)
    annotations = []
    for band, kind in enumerate(kinds):
        rows, cols = labels[kind]
        for layer in range(layers):
            for head in range(heads):
                top = (band * layers + layer) * (tile_rows + gap)
                left = head * (tile_cols + gap)
                tile = attention[kind][layer, head]
                canvas[top: top + tile.shape[0], left: left + tile.shape[1]] = rounded(tile)
                where = f"{KIND_NAMES[kind]}, layer {shown(layer)}, head {shown(head)}"
                for r in range(tile.shape[0]):
                    for c in range(tile.shape[1]):
                        hover[top + r, left + c] = (f"{where}<br>query {label(rows[r])}<br>key {label(cols[c])}"
                                                    f"<br>weight {tile[r, c]:.3f}")
                annotations.append({"x": left + (tile_cols - 1) / 2, "y": top - 0.6,
                                    "text": f"{SHORT_NAMES[kind]} L{shown(layer)} H{shown(head)}",
                                    "showarrow": False, "yanchor": "bottom", "font": {"size": 10}})
    figure = go.Figure(go.Heatmap(z=canvas, text=hover, hovertemplate="%{text}<extra></extra>", hoverongaps=False,
                                  zmin=0.0, zmax=1.0, colorscale=ATTENTION_COLORS,
                                  colorbar={"title": {"text": "weight"}, "thickness": 10}))
    figure.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    figure.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    figure.update_layout(annotations=annotations)
    return base_layout(figure, title, height=min(1400, 80 + grid_rows * (14 * tile_rows + 30)))
