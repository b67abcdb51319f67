"""One recording point's vectors over a list of sentences, one row per real token: what a dictionary trains on.

A point of the encoder (its path begins with "encoder") is read on the source side: the encoder alone runs over each
batch of sources. Any other point is read on the target side, teacher-forced as the atlas reads it: the decoder reads
the start token, then the reference shifted by one, so row i of a sentence is the position that predicted its
reference's piece i (the reference's pieces + </s>). Pad positions are left out. Both sides are cut to the model's
positions as decoding cuts a source (`Translator.source_ids`).

Shapes: B sentences in a batch, S / T padded source / target length, D the point's width, N all real tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..choices import type_phrase
from ..core.capture import record
from ..core.probes import SOURCE, TARGET, points_of, recordable
from ..corpus.data import pad
from ..decoding.translator import Translator
from .dictionary import DictionaryError, checked_setting


@dataclass
class Activations:
    point: str  # the point's module path
    side: str  # SOURCE or TARGET: whose tokens the rows are
    vectors: torch.Tensor  # (N, D) float32, on the CPU
    sentences: torch.Tensor  # (N,) each row's sentence, an index into the list gathered over
    positions: torch.Tensor  # (N,) each row's position in its sentence (0-based)
    token_ids: torch.Tensor | None = None  # (N,) each row's piece: the source's, or the reference piece it predicted


def point_path(model, point) -> str:
    """The module path of the one point `point` names (a path, or a short name that finds a single point); a name
    the model does not record, or one that finds several points, is a DictionaryError listing the layer outputs."""
    outputs = [name for name in recordable(model) if name.endswith(".output")]
    if not isinstance(point, str):
        raise DictionaryError(f"point must be a string naming one recording point, got {type_phrase(point)}")
    try:
        found = points_of(model, point)[point]
    except ValueError as error:
        raise DictionaryError(f"point: {error}. The layer outputs: {', '.join(outputs)}") from None
    if len(found) != 1:
        raise DictionaryError(f"point {point!r} names {len(found)} points ({found[0].name}, ...); a dictionary reads "
                              f"one, e.g. {found[0].name}. The layer outputs: {', '.join(outputs)}")
    return found[0].name


def side_of(path: str) -> str:
    return SOURCE if path.startswith("encoder") else TARGET


def checked_texts(name: str, texts) -> list[str]:
    if not isinstance(texts, (list, tuple)) or not all(isinstance(text, str) for text in texts):
        raise DictionaryError(f"{name} must be a list of strings, got {type_phrase(texts)}")
    return list(texts)


def token_ids(translator: Translator, sources: list[str], targets: list[str] | None) -> tuple[list, list | None]:
    """Each source's ids (+ </s>) and each reference's (+ </s>), cut to the model's positions."""
    room, eos = translator.model.config.max_len - 1, translator.tokenizer.eos_id
    source_ids = [translator.source_ids(text)[0] for text in sources]
    if targets is None:
        return source_ids, None
    return source_ids, [ids[:room] + [eos] for ids in translator.tokenizer.encode_target_batch(targets)]


@torch.inference_mode()
def batch_vectors(model, path: str, source_ids: list, target_ids: list | None) -> list[torch.Tensor]:
    """One batch through the model: each sentence's (tokens, D) vectors at `path`, pad positions left out."""
    config = model.config
    src = pad(source_ids, config.pad_id).to(model.device)
    with record(model, path) as recording:
        if target_ids is None:
            model.encode(src)
        else:  # the decoder reads the start token, then the reference shifted by one
            tgt = pad([[config.decoder_start_id] + ids[:-1] for ids in target_ids], config.pad_id)
            model(src, tgt.to(model.device))
    value = recording[path][0]  # (B, S or T, D)
    if value.ndim != 3:
        raise DictionaryError(f"point {path!r} records {tuple(value.shape)} a batch, not one vector per token "
                              f"(B, positions, D); choose a point such as a layer's output")
    lengths = [len(ids) for ids in (target_ids if target_ids is not None else source_ids)]
    return [value[row, :length].float().cpu() for row, length in enumerate(lengths)]


def gather_activations(translator: Translator, point: str, sources: list[str], targets: list[str] | None = None,
                       batch_size: int = 32, progress: Callable[[int, int], None] | None = None) -> Activations:
    """`point`'s vectors over every real token of `sources` (an encoder point) or, teacher-forced on the
    (source, reference) pairs, of `targets` (any other point). `progress(done, total)` hears each batch's end."""
    path = point_path(translator.model, point)
    side = side_of(path)
    sources = checked_texts("sources", sources)
    if not sources:
        raise DictionaryError("sources: no sentences given")
    if side == TARGET and targets is None:
        raise DictionaryError(f"point {path!r} is the decoder's: give targets, the reference of each source")
    if targets is not None and len(checked_texts("targets", targets)) != len(sources):
        raise DictionaryError(f"targets: {len(targets)} sentences for {len(sources)} sources; give one each")
    batch_size = checked_setting("batch_size", batch_size, int, 1)
    source_ids, target_ids = token_ids(translator, sources, targets if side == TARGET else None)
    rows = []
    for start in range(0, len(sources), batch_size):
        chunk = slice(start, start + batch_size)
        rows += batch_vectors(translator.model, path, source_ids[chunk], target_ids[chunk] if target_ids else None)
        if progress is not None:
            progress(min(start + batch_size, len(sources)), len(sources))
    sentences = torch.cat([torch.full((len(vectors),), index) for index, vectors in enumerate(rows)])
    positions = torch.cat([torch.arange(len(vectors)) for vectors in rows])
    ids = target_ids if side == TARGET else source_ids
    row_ids = torch.tensor([piece for sentence in ids for piece in sentence])
    return Activations(path, side, torch.cat(rows), sentences, positions, row_ids)
