"""What a patching analysis asks, and the runs it patches: a clean source, a corrupted one (another sentence, the
clean one with one piece replaced by a suggestion of the same piece count, or with Gaussian noise on one word's
embeddings), the clean translation teacher-forced, and one target piece
of it (with an optional contrast piece).

Shapes: B batched patched runs, S_x / S_c clean / corrupted source length, T decoder inputs (<s> and the clean
translation before the target piece), V vocabulary, D d_model.

Positions across sentences of different length: a corrupted position stands for a clean one only where the pieces
line up, the common beginning and the common end (EOS included); with equal lengths every position lines up with
the same position. Patching by position happens only on aligned pairs, and the others are named.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...core.model import Transformer, padding_mask
from ...core.patching import patch

NOISE_TIMES_STD = 3.0  # ROME (Meng et al., 2022): noise of 3 x the standard deviation of the embeddings


def aligned_positions(clean: list[int], corrupted: list[int]) -> list[tuple[int, int]]:
    """(clean position, corrupted position) pairs that stand for each other: all of them with equal lengths, else
    the common beginning and the common end."""
    if len(clean) == len(corrupted):
        return [(i, i) for i in range(len(clean))]
    start = 0
    while start < min(len(clean), len(corrupted)) and clean[start] == corrupted[start]:
        start += 1
    end = 0
    while end < min(len(clean), len(corrupted)) - start and clean[-1 - end] == corrupted[-1 - end]:
        end += 1
    tail = [(len(clean) - end + k, len(corrupted) - end + k) for k in range(end)]
    return [(i, i) for i in range(start)] + tail


def embedding_noise_scale(model: Transformer, times_std: float = NOISE_TIMES_STD) -> float:
    """ROME's noise: `times_std` (NOISE_TIMES_STD) x the standard deviation of the source embeddings, as the model
    scales them."""
    embedding = model.src_embed
    return float(times_std * embedding.weight.detach().float().std() * embedding.scale)


def check_replaceable(source_length: int, position: int) -> None:
    """Source piece `position` (0-based) of a source of `source_length` pieces (EOS last) may be replaced: any piece
    but the EOS."""
    if not 0 <= position < source_length - 1:
        raise ValueError(f"replace_piece must be a source piece, in [1, {source_length - 1}], got {position + 1}")


def replaced_source(src_tokens: list[str], position: int, replacement: str) -> str:
    """The source as text with its piece `position` (0-based; EOS last) replaced by `replacement`, a piece or a typed
    word: it starts a word where the replaced piece does (SentencePiece's ▁) and continues one where it does."""
    check_replaceable(len(src_tokens), position)
    word = replacement.strip().lstrip("▁") if isinstance(replacement, str) else ""
    if not word or any(c.isspace() or c == "▁" for c in word):
        raise ValueError(f"replacement must be one word, got {replacement!r}")
    pieces = list(src_tokens[:-1])
    pieces[position] = ("▁" if pieces[position].startswith("▁") else "") + word
    return "".join(pieces).replace("▁", " ").strip()  # SentencePiece's spaces, as text


def same_count_suggestions(model: Transformer, tokenizer, src_ids: list[int], position: int, count: int = 5):
    """Pieces that could replace source piece `position` (0-based) and keep the piece count, so every position still
    lines up: pieces of letters that start a word where it does (or continue one where it does), nearest to it by
    the cosine of the model's source embeddings."""
    check_replaceable(len(src_ids), position)
    table = model.src_embed.weight.detach().float()
    own = src_ids[position]
    starts = tokenizer.id_to_piece(own).startswith("▁")
    similarity = torch.nn.functional.cosine_similarity(table, table[own][None], dim=-1)
    found = []
    for candidate in similarity.argsort(descending=True).tolist():
        piece = tokenizer.id_to_piece(candidate)
        if candidate != own and piece.startswith("▁") == starts and piece.lstrip("▁").isalpha():
            found.append(piece)
            if len(found) == count:
                break
    return found


@dataclass
class Question:
    """One patching question in ids, every index 0-based (the API and the CLI count from 1)."""

    clean_src: list[int]  # source ids, EOS included
    corrupted_src: list[int]
    target_ids: list[int]  # the clean translation (no <s>)
    step: int  # the target piece's index in target_ids
    contrast_id: int | None = None
    noise_positions: tuple[int, ...] = ()  # corruption by noise on these source positions (then corrupted = clean)
    noise_scale: float = 0.0
    seed: int = 0

    @property
    def target_id(self) -> int:
        return self.target_ids[self.step]


class Runs:
    """The clean and corrupted teacher-forced passes and batched patched ones, on one model."""

    def __init__(self, model: Transformer, question: Question):
        self.model, self.question = model, question
        device = model.device
        self.clean_src = torch.tensor([question.clean_src], device=device)
        self.corrupted_src = torch.tensor([question.corrupted_src], device=device)
        prefix = [model.config.decoder_start_id] + question.target_ids[: question.step]
        self.prefix = torch.tensor([prefix], device=device)  # (1, T)
        self.pairs = aligned_positions(question.clean_src, question.corrupted_src)
        self.noise = None
        self.memory = None  # the corrupted run's encoder output and mask, once a decoder-only pass asks
        if question.noise_positions:
            generator = torch.Generator().manual_seed(question.seed)
            noise = torch.randn(len(question.noise_positions), model.config.d_model, generator=generator)
            self.noise = torch.zeros(1, len(question.corrupted_src), model.config.d_model)
            self.noise[0, list(question.noise_positions)] = noise * question.noise_scale
            self.noise = self.noise.to(device)

    def corruption(self):
        """The patch that makes the corrupted run from its source: the noise, or nothing."""
        if self.noise is None:
            return patch(self.model, {"encoder_embedding_scaled": lambda x: x}, positions=[])
        return patch(self.model, {"encoder_embedding_scaled": lambda x: x + self.noise})

    def last_logits(self, src: torch.Tensor, rows: int = 1) -> torch.Tensor:
        """(rows, V) logits of the target piece: `rows` copies of the source run at once (the patches open in this
        context tell them apart)."""
        src = src.expand(rows, -1)
        mask = padding_mask(src, self.model.config.pad_id)
        return self.output(self.model.encode(src, mask), mask, rows)

    def output(self, memory: torch.Tensor, mask: torch.Tensor, rows: int) -> torch.Tensor:
        """The target piece's logits (rows, V): the decoder over the prefix, and the final norm and the output
        projection at its last position only (over every position they would cost the most of a pass)."""
        hidden = self.model.decoder_layers_output(memory, mask, self.prefix.expand(rows, -1))
        return self.model.generator(self.model.decoder_norm(hidden[:, -1])).float()

    def decoder_last_logits(self, rows: int) -> torch.Tensor:
        """`last_logits` of the corrupted source for patches the decoder alone reads: the corrupted encoder output,
        computed once, shared by the `rows` decoder passes."""
        if self.memory is None:
            with self.corruption():
                mask = padding_mask(self.corrupted_src, self.model.config.pad_id)
                self.memory = self.model.encode(self.corrupted_src, mask), mask
        memory, mask = self.memory
        return self.output(memory.expand(rows, -1, -1), mask.expand(rows, -1, -1, -1), rows)

    def clean(self) -> torch.Tensor:
        return self.last_logits(self.clean_src)

    def corrupted(self, rows: int = 1) -> torch.Tensor:
        with self.corruption():
            return self.last_logits(self.corrupted_src, rows)

    def probability(self, logits: torch.Tensor) -> torch.Tensor:
        """(rows,) the target piece's probability."""
        return logits.softmax(-1)[:, self.question.target_id]

    def logit_difference(self, logits: torch.Tensor) -> torch.Tensor | None:
        """(rows,) logit of the target piece minus the contrast piece's, or None without one."""
        if self.question.contrast_id is None:
            return None
        return logits[:, self.question.target_id] - logits[:, self.question.contrast_id]

    def in_corrupted_frame(self, clean: torch.Tensor, corrupted: torch.Tensor, axis: int) -> torch.Tensor:
        """The corrupted run's tensor with the clean values put at the aligned source positions (`axis`)."""
        if clean.shape == corrupted.shape and len(self.pairs) == clean.size(axis):
            return clean
        frame = corrupted.clone()
        if self.pairs:
            to = torch.tensor([j for _, j in self.pairs], device=clean.device)
            frm = torch.tensor([i for i, _ in self.pairs], device=clean.device)
            frame.index_copy_(axis, to, clean.index_select(axis, frm))
        return frame


__all__ = ["NOISE_TIMES_STD", "Question", "Runs", "aligned_positions", "check_replaceable",
           "embedding_noise_scale", "replaced_source", "same_count_suggestions"]
