"""One teacher-forced batch through the model, read through the probes the model declares (core/probes.py): every
layer's output on both sides, each head's queries and keys, and cross-attention's weights.

Shapes: B sentences, S / T padded source / target length, L layers, H heads, D d_model, hs head size; N the real
tokens of a side in the batch (sentence by sentence, position by position), n those of them in the sample.

What comes back is a flat dict of numpy arrays, the same from either engine (Ray moves it between processes):
    sentences (B,) the batch's sentence indices
    {side}_rows (N,) token rows           {side}_hidden (N, L, D) float16
    cross_argmax (N_target, L, H) int16   cross_entropy (N_target, L, H) float32
    {kind}_{part}_rows (n,)               {kind}_{part} (n, L, H, hs) float16, part "queries" or "keys"
"""
from __future__ import annotations

import numpy as np
import torch

from ..core.capture import record
from ..core.probes import ATTENTION_KINDS, SOURCE, TARGET
from .corpus import TokenizedCorpus
from .store import SIDES

HIDDEN = {SOURCE: "encoder_hidden", TARGET: "decoder_hidden"}
# the side whose tokens ask (queries) and answer (keys) in each attention kind
PART_SIDES = {"encoder_self": (SOURCE, SOURCE), "decoder_self": (TARGET, TARGET), "cross": (TARGET, SOURCE)}
PARTS = ("queries", "keys")
PROBE_NAMES = (*HIDDEN.values(), "cross", *(f"{kind}.{part}" for kind in ATTENTION_KINDS for part in PARTS))


def part_side(kind: str, part: str) -> str:
    return PART_SIDES[kind][PARTS.index(part)]


def padded(rows: list[list[int]], pad_id: int, first: int | None = None) -> torch.Tensor:
    """(B, longest) ids; `first`: put this id before each row (the decoder's start token)."""
    rows = [([first] if first is not None else []) + r for r in rows]
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def token_rows(corpus: TokenizedCorpus, side: str, sentences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The batch's real tokens of `side`: their global rows (N,) and (sentence in batch, position) pairs (N, 2)."""
    rows, places = [], []
    for i, sentence in enumerate(sentences):
        span = corpus.rows(side, int(sentence))
        rows.append(np.arange(span.start, span.stop))
        places.append(np.stack([np.full(span.stop - span.start, i), np.arange(span.stop - span.start)], axis=1))
    return np.concatenate(rows), np.concatenate(places)


def entropy(weights: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats over the last axis; masked keys carry weight 0 and add nothing."""
    return -(weights * weights.clamp_min(torch.finfo(weights.dtype).tiny).log()).sum(-1)


@torch.inference_mode()
def extract_batch(model, corpus: TokenizedCorpus, sentences: np.ndarray, sampled: dict[str, np.ndarray]) -> dict:
    """Runs `sentences` (indices into the corpus) teacher-forced; `sampled`: side -> sorted sampled token rows."""
    config = model.config
    src = padded([corpus.ids[SOURCE][s] for s in sentences], config.pad_id).to(model.device)
    tgt_ids = [corpus.ids[TARGET][s] for s in sentences]
    tgt = padded([t[:-1] for t in tgt_ids], config.pad_id, first=config.decoder_start_id).to(model.device)
    with record(model, PROBE_NAMES) as recording:
        model.layers_pass(src, tgt)
    out = {"sentences": np.asarray(sentences)}
    places = {}
    for side in SIDES:
        rows, places[side] = token_rows(corpus, side, sentences)
        batch, position = torch.from_numpy(places[side][:, 0]), torch.from_numpy(places[side][:, 1])
        hidden = recording[HIDDEN[side]]  # (L, B, S or T, D)
        out[f"{side}_rows"] = rows
        out[f"{side}_hidden"] = hidden[:, batch, position].transpose(0, 1).to(torch.float16).cpu().numpy()
    cross = recording["cross"]  # (L, B, H, T, S)
    batch, position = (torch.from_numpy(places[TARGET][:, i]) for i in (0, 1))
    weights = cross[:, batch, :, position]  # (N_target, L, H, S): split advanced indices put N first
    out["cross_argmax"] = weights.argmax(-1).to(torch.int16).cpu().numpy()
    out["cross_entropy"] = entropy(weights.float()).cpu().numpy()
    for kind in ATTENTION_KINDS:
        for part in PARTS:
            side = part_side(kind, part)
            keep = np.isin(out[f"{side}_rows"], sampled[side])
            batch, position = (torch.from_numpy(places[side][keep, i]) for i in (0, 1))
            vectors = recording[f"{kind}.{part}"]  # (L, B, H, S or T, hs) -> indexed (n, L, H, hs)
            out[f"{kind}_{part}_rows"] = out[f"{side}_rows"][keep]
            out[f"{kind}_{part}"] = vectors[:, batch, :, position].to(torch.float16).cpu().numpy()
    return out
