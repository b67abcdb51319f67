"""Everything the live view draws, sent to the browser once per translation: every attention kind, layer
and head with the labels the trace carries, weights quantised to bytes (1/255 steps, invisible in a
colour scale), deflated (zlib: most weights are near 0, so they shrink to about 40%) and base64-encoded, so a
30-token sentence costs about 30 KB. The norms of what each head moves from each key come along the same way, so
the browser draws norm-based attention ‖α f(x)‖ (Kobayashi et al., 2020) from the same weights. The browser
inflates them with its own DecompressionStream (static/live_data.js)."""
from __future__ import annotations

import base64
import zlib

import numpy as np

from transformer.core.head_ref import head_label, layer_label, shown
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.words import word_groups, word_label


def packed(values: np.ndarray) -> str:
    """values in [0, 1] as bytes (1/255 steps), deflated, base64: what static/live_data.js's unpack reads."""
    quantised = np.clip(np.rint(values * 255), 0, 255).astype(np.uint8)
    # level 6: barely larger than level 9, several times faster (docs/speed.md)
    return base64.b64encode(zlib.compress(quantised.tobytes(), 6)).decode("ascii")


def relative_norms(norms: np.ndarray) -> np.ndarray:
    """(L, H, cols) norms over each head's largest: norm-based attention scales each row to sum to 1, so only a
    head's norms relative to each other matter, and bytes keep them to 1/255 of its largest."""
    return norms / np.maximum(norms.max(axis=-1, keepdims=True), 1e-30)


def words(pieces: list[str]) -> dict:
    """The pieces' words (transformer/decoding/words.py), so the browser merges without re-deriving them: each
    word's piece indices and label, and the labels of its first 1, 2, ... pieces (a word cut by a decoding step)."""
    groups = word_groups(pieces)
    return {"groups": groups, "labels": [word_label(pieces, g) for g in groups],
            "prefix_labels": [[word_label(pieces, g[:n]) for n in range(1, len(g) + 1)] for g in groups]}


def live_payload(translation, start: dict | None = None) -> dict:
    """start: the view to open on (kind, 0-based layer); the visitor switches from there in the browser. Labels
    (layers and heads numbered from 1, words) come made, so the browser never renumbers or regroups."""
    kinds = {}
    for kind in ATTENTION_KINDS:
        recorded = translation.recorded[kind]
        kinds[kind] = {"title": recorded.title.split(" (")[0], "rows": recorded.rows, "cols": recorded.cols,
                       "row_title": recorded.row_title, "col_title": recorded.col_title,
                       "row_words": words(recorded.rows), "col_words": words(recorded.cols),
                       # its own stack's shape: the encoder's and the decoder's may differ
                       "layers": recorded.values.shape[0], "heads": recorded.values.shape[1],
                       "q": packed(recorded.values)}  # (L, H, rows, cols), row-major
        if kind == "decoder_self":  # at a decoding step its keys are cut to the prefix too, from column 0
            kinds[kind]["step_cols"] = 0
        if translation.norms is not None:  # ‖f(x_key)‖ per layer, head and key: the browser weighs α by it
            kinds[kind]["norms"] = packed(relative_norms(translation.norms[kind]))  # (L, H, cols)
    # the labels cover the widest stack; each kind reads its own first `layers` and `heads` of them
    layers = max(kinds[kind]["layers"] for kind in ATTENTION_KINDS)
    heads = max(kinds[kind]["heads"] for kind in ATTENTION_KINDS)
    decoder_layers = translation.recorded["cross"].values.shape[0]
    alti = translation.contributions
    if alti is not None:  # one more kind: ALTI+ contributions after each decoder layer, one "head"
        cols = translation.src_tokens + translation.decoder_input_tokens
        kinds["alti"] = {"title": "ALTI+ contributions", "rows": translation.tgt_tokens, "cols": cols,
                         "row_title": "the token it predicted", "col_title": "source pieces, then the decoder inputs",
                         "row_words": words(translation.tgt_tokens), "col_words": words(cols), "alti": True,
                         "layers": decoder_layers, "heads": 1,
                         "step_cols": len(translation.src_tokens), "q": packed(alti.layers[:, None])}
    return {"src": translation.src_tokens, "tgt": translation.tgt_tokens, "layers": layers, "heads": heads,
            # per output piece, the share of its prediction that came from the source (ALTI+), or None
            "source_share": None if alti is None else alti.source_share.round(3).tolist(),
            "layer_labels": [layer_label(layer).capitalize() for layer in range(layers)],
            "head_labels": [head_label(head).capitalize() for head in range(heads)],
            "tile_labels": [[f"L{shown(layer)} H{shown(head)}" for head in range(heads)] for layer in range(layers)],
            "kinds": kinds, "start": start or {"kind": "cross", "layer": decoder_layers - 1}}
