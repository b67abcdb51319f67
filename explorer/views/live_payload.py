"""Everything the live view draws, sent to the browser once per translation: every attention kind, layer
and head with the labels the trace carries, weights quantised to bytes (1/255 steps, invisible in a
colour scale) and base64-encoded, so a 30-token sentence costs tens of kilobytes, not megabytes."""
from __future__ import annotations

import base64

import numpy as np

from transformer.core.probes import ATTENTION_KINDS


def quantised(values: np.ndarray) -> str:
    return base64.b64encode(np.clip(np.rint(values * 255), 0, 255).astype(np.uint8).tobytes()).decode("ascii")


def live_payload(translation, start: dict | None = None) -> dict:
    """start: the view to open on (kind, 0-based layer); the visitor switches from there in the browser."""
    kinds = {}
    for kind in ATTENTION_KINDS:
        recorded = translation.recorded[kind]
        kinds[kind] = {"title": recorded.title.split(" (")[0], "rows": recorded.rows, "cols": recorded.cols,
                       "row_title": recorded.row_title, "col_title": recorded.col_title,
                       "q": quantised(recorded.values)}  # (L, H, rows, cols), row-major
    layers, heads = translation.recorded["cross"].values.shape[:2]
    return {"src": translation.src_tokens, "tgt": translation.tgt_tokens, "layers": layers, "heads": heads,
            "kinds": kinds, "start": start or {"kind": "cross", "layer": layers - 1}}
