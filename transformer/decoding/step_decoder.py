"""Incremental decoding of a batch of growing prefixes, shared by every strategy.

Shapes: N rows still decoding, S source length, V vocabulary.
"""
from __future__ import annotations

import torch

from ..core.fused_step import FusedStep
from ..core.model import Transformer, padding_mask
from ..core.probes import active_patches, is_recorded


def never_produced_ids(config, device) -> torch.Tensor:
    """The ids no decoding ever produces: padding and the decoder's start token (<s>; <pad> again in Marian models,
    whose `bad_words_ids` forbid it), unless the start token is </s> itself (M2M100, NLLB, mBART-50 and BART start
    from </s>), which ends every translation. `config` is the model's ModelConfig."""
    return torch.tensor(sorted({config.pad_id, config.decoder_start_id} - {config.eos_id}), device=device)


def forbid_never_produced(logits: torch.Tensor, config, ids: torch.Tensor | None = None) -> torch.Tensor:
    """`logits` (..., V) with padding and the start token at -inf, in place: the one rule every reading of the output
    distribution shares with decoding. `ids` (never_produced_ids) saves building the index in a hot loop."""
    ids = never_produced_ids(config, logits.device) if ids is None else ids
    return logits.index_fill_(-1, ids, float("-inf"))


def length_limits(src_lengths: list[int], max_length: int | None, model_max_len: int) -> list[int]:
    """Most output tokens (EOS included) per sentence: the caller's cap, else 2 x source + 10."""
    return [min(model_max_len, max_length or 2 * n + 10) for n in src_lengths]


def encode_batch(model: Transformer, sources: list[list[int]], device):
    """Pads sources (each ending with EOS) into (B, S) and runs the encoder once."""
    longest = max(len(s) for s in sources)
    src = torch.full((len(sources), longest), model.config.pad_id, dtype=torch.long)
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(ids)
    src = src.to(device)
    src_mask = padding_mask(src, model.config.pad_id)
    return model.encode(src, src_mask), src_mask


class StepDecoder:
    """Next-token logits for a batch of growing prefixes, with the key/value cache or (use_cache=False,
    the reference the cache is measured against) by re-running the decoder over the whole prefix. With the cache,
    every layer's step runs in one call of the compiled kernel where it computes the same (core/fused_step.py)."""

    def __init__(self, model: Transformer, memory, src_mask, use_cache: bool = True):
        # with no padding in the batch the cross-attention needs no mask: skipping it saves work every step
        # an open patch decodes by re-running the whole prefix, so a patched position of the decoder is the same
        # position in every step as in the teacher-forced pass
        use_cache = use_cache and not active_patches.get()
        self.model, self.memory, self.use_cache = model, memory, use_cache
        self.src_mask = None if bool(src_mask.all()) else src_mask
        self.fused = FusedStep.start(model, memory, self.src_mask) if use_cache else None
        self.cache = model.new_cache() if use_cache and self.fused is None else None
        start = model.config.decoder_start_id
        self.prefix = torch.full((memory.size(0), 1), start, dtype=torch.long, device=memory.device)
        self.never_produced = never_produced_ids(model.config, memory.device)

    def step(self) -> torch.Tensor:
        """(N, V) float32 logits of the next token; padding and the start token can never be produced."""
        if self.fused is not None:
            logits = self.fused.step(self.prefix[:, -1])
        elif self.use_cache:
            logits = self.model.decode_step(self.memory, self.src_mask, self.prefix[:, -1], self.cache)
        else:
            logits = self.model.decode(self.memory, self.src_mask, self.prefix)[:, -1]
        logits = logits.float()
        if is_recorded(self.model.logits):  # the recording keeps the model's logits, not the forbidden ones
            logits = logits.clone()
        return forbid_never_produced(logits, self.model.config, self.never_produced)

    def select_rows(self, rows: list[int]) -> None:
        """Keeps batch rows `rows`, in that order (rows may repeat: beam search copies hypotheses)."""
        index = torch.tensor(rows, dtype=torch.long, device=self.memory.device)
        self.memory = self.memory.index_select(0, index)
        if self.src_mask is not None:
            self.src_mask = self.src_mask.index_select(0, index)
        self.prefix = self.prefix.index_select(0, index)
        if self.cache is not None:
            self.cache.reorder(index)
        if self.fused is not None:
            self.fused.select_rows(index)

    def append(self, tokens: torch.Tensor) -> None:
        """Feeds one token per row (N,) as the newest decoder input."""
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)
