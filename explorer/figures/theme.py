"""Shared look: transparent backgrounds and neutral text, so figures read in light and dark mode.

Dark mode flips the text colour through CSS (assets/style.css), since a figure cannot see the page's theme.
"""
from __future__ import annotations

import html
import textwrap

import numpy as np
import plotly.graph_objects as go

ATTENTION_COLORS = "Viridis"  # perceptually uniform, readable on light and dark backgrounds
ACCENT, MUTED = "#f97316", "#60a5fa"  # chosen token / other candidates
DECIMALS = 4  # rounding of values sent to the browser: smaller payloads, no visible difference


def label(piece: str) -> str:
    """A token as plotly should show it: literal text, never markup."""
    return html.escape(piece, quote=False)


# Two invisible characters spell a position in binary after a label, so repeated tokens ("▁a" twice) stay
# distinct categories on a plotly axis while looking identical. Hover can then name query and key from the
# axes alone, instead of a text string per cell, which made large figures several times bigger.
_INVISIBLE_DIGITS = {"0": "\u200b", "1": "\u200c"}


def unique_labels(tokens: list[str], start: int = 0) -> list[str]:
    return [label(t) + "".join(_INVISIBLE_DIGITS[b] for b in bin(start + i)[2:]) for i, t in enumerate(tokens)]


def visible(axis_label: str) -> str:
    return axis_label.replace("\u200b", "").replace("\u200c", "")


def rounded(values: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(values, dtype=np.float32), DECIMALS)


TITLE_CHARACTERS = 48  # a title's line at 14 px fits a phone's figure (~350 px); plotly never wraps one itself


def title_lines(title: str) -> list[str]:
    return textwrap.wrap(title, TITLE_CHARACTERS, break_long_words=False, break_on_hyphens=False) or [""]


def base_layout(figure: go.Figure, title: str, height: int, **layout) -> go.Figure:
    lines = title_lines(title)
    figure.update_layout(
        title={"text": "<br>".join(label(line) for line in lines), "x": 0.0, "xanchor": "left", "font": {"size": 14}},
        height=height + 18 * (len(lines) - 1), margin={"l": 10, "r": 10, "t": 40 + 18 * (len(lines) - 1), "b": 10},
        paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
        font={"color": "#374151", "size": 12}, **layout,
    )
    return figure
