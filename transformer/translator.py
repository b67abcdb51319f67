"""Text in, translation out: tokenizer + model + decoding, with the pieces the plots label."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .beam import beam_search
from .checkpoint import METRICS_FILE, TOKENIZER_FILE, load_checkpoint, read_metrics, save_checkpoint
from .decoding import DecodedSentence, SamplingSettings, decode_single_path
from .model import Transformer
from .tokenizer import BOS_ID, EOS_ID, Tokenizer

STRATEGIES = ("greedy", "beam", "sample")


@dataclass
class Attention:
    """numpy float32 arrays. Rows are queries, columns keys."""

    encoder_self: np.ndarray  # (L, H, S, S)
    decoder_self: np.ndarray  # (L, H, T, T): row i predicted tgt_tokens[i]; keys are BOS + tgt_tokens[:-1]
    cross: np.ndarray  # (L, H, T, S): columns are src_tokens


@dataclass
class Step:
    token: str
    token_id: int
    prob: float
    topk: list[tuple[str, float]]
    hypotheses: list[tuple[str, float]] | None = None  # beam search: live hypotheses (pieces joined by spaces, score)


@dataclass
class Translation:
    source: str  # the input sentence
    text: str  # the detokenized translation
    src_tokens: list[str]  # source pieces, ending with </s>
    tgt_tokens: list[str]  # output pieces, without BOS, with </s> if produced
    src_ids: list[int]
    tgt_ids: list[int]
    steps: list[Step]
    score: float
    attention: Attention | None
    truncated: bool  # the source was longer than the model's max_len and was cut

    @property
    def decoder_input_tokens(self) -> list[str]:
        """Keys of decoder self-attention: what was fed to the decoder, BOS followed by tgt_tokens[:-1]."""
        return ["<s>"] + self.tgt_tokens[:-1]


def check_device(device: str) -> torch.device:
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but CUDA is not available here; use device='cpu'")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {str(device)!r}")
    return device


class Translator:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, config: dict | None = None,
                 source: Path | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config or {"model": model.config.to_dict()}
        self.source = source  # the folder it was loaded from, for metrics and the tokenizer file

    @classmethod
    def from_pretrained(cls, directory, device: str = "cpu") -> "Translator":
        model, tokenizer, config = load_checkpoint(directory, check_device(device))
        return cls(model, tokenizer, config, Path(directory))

    @property
    def metrics(self) -> dict | None:
        return read_metrics(self.source) if self.source else None

    def save_pretrained(self, directory, metrics: dict | None = None, dtype: torch.dtype = torch.float32) -> Path:
        if metrics is None and self.source and (self.source / METRICS_FILE).is_file():
            metrics = self.metrics
        extra = {k: v for k, v in self.config.items() if k != "model"}
        return save_checkpoint(directory, self.model, self._tokenizer_file(), extra, metrics, dtype)

    def _tokenizer_file(self) -> Path:
        if self.source is None:
            raise ValueError("this Translator was not loaded from a folder; save with checkpoint.save_checkpoint")
        return self.source / TOKENIZER_FILE

    def source_ids(self, text: str) -> tuple[list[int], bool]:
        """Ids ending with EOS, cut to fit the model's positions; and whether it was cut."""
        ids = self.tokenizer.encode(text)
        room = self.model.config.max_len - 1
        return ids[:room] + [EOS_ID], len(ids) > room

    def translate(self, text: str, **settings) -> Translation:
        return self.translate_batch([text], **settings)[0]

    def translate_batch(self, texts: list[str], strategy: str = "greedy", beam_size: int = 4,
                        length_penalty: float = 0.6, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                        seed: int = 0, max_length: int | None = None, capture: bool = False) -> list[Translation]:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if not texts:
            return []
        encoded = [self.source_ids(text) for text in texts]
        sources = [ids for ids, _ in encoded]
        if strategy == "beam":
            decoded = beam_search(self.model, sources, beam_size, length_penalty, max_length, capture)
        else:
            sampling = SamplingSettings(temperature, top_k, top_p, seed) if strategy == "sample" else None
            decoded = decode_single_path(self.model, sources, max_length, sampling, capture)
        return [self._result(text, ids, truncated, out) for text, (ids, truncated), out in zip(texts, encoded, decoded)]

    def _result(self, source: str, src_ids: list[int], truncated: bool, out: DecodedSentence) -> Translation:
        piece = self.tokenizer.id_to_piece
        steps = [
            Step(piece(s.token_id), s.token_id, s.prob, [(piece(i), p) for i, p in s.topk],
                 None if s.hypotheses is None else [(" ".join(piece(i) for i in ids), score) for ids, score in s.hypotheses])
            for s in out.steps
        ]
        attention = None
        if out.encoder_self is not None:
            attention = Attention(out.encoder_self, out.decoder_self, out.cross)
        return Translation(
            source=source, text=self.tokenizer.decode(out.token_ids), src_tokens=[piece(i) for i in src_ids],
            tgt_tokens=[piece(i) for i in out.token_ids], src_ids=src_ids, tgt_ids=out.token_ids,
            steps=steps, score=out.score, attention=attention, truncated=truncated,
        )


__all__ = ["Attention", "Step", "Translation", "Translator", "BOS_ID", "EOS_ID"]
