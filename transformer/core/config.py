"""The model's configuration: one typed dataclass, saved with the weights and rebuilt from them."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

NORM_PLACEMENTS = ("pre", "post")
POSITIONAL_ENCODINGS = ("sinusoidal", "learned")


@dataclass
class ModelConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 3  # layers in each stack (encoder and decoder)
    d_ff: int = 1024  # hidden width of the position-wise feed-forward block
    dropout: float = 0.1  # on embeddings and on every sub-layer's output before the residual add
    attention_dropout: float = 0.0  # on attention probabilities (training only; captured values are pre-dropout)
    max_len: int = 256  # longest sequence the positional table covers
    norm: str = "pre"  # "pre": LayerNorm before each sub-layer (stable); "post": after the residual add (the paper)
    final_norm: bool = True  # a LayerNorm after the last layer of each stack (needed with pre-norm)
    pos_encoding: str = "sinusoidal"  # "sinusoidal" (fixed buffer, the paper) or "learned" (a trained table)
    share_embeddings: bool = False  # one embedding for source and target (needs a joint vocabulary)
    tie_output: bool = False  # output projection reuses the target embedding matrix (Press & Wolf, 2017)
    pad_id: int = 0  # padding id: masked out as a key and ignored by the loss

    def __post_init__(self) -> None:
        problems = []
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if not problems and self.d_model % self.n_heads:
            problems.append(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                problems.append(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.norm not in NORM_PLACEMENTS:
            problems.append(f"norm must be one of {NORM_PLACEMENTS}, got {self.norm!r}")
        if self.pos_encoding not in POSITIONAL_ENCODINGS:
            problems.append(f"pos_encoding must be one of {POSITIONAL_ENCODINGS}, got {self.pos_encoding!r}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            problems.append(
                "share_embeddings needs src_vocab_size == tgt_vocab_size "
                f"(got {self.src_vocab_size} and {self.tgt_vocab_size}); use a joint vocabulary or set it False"
            )
        if not problems and not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            problems.append(f"pad_id ({self.pad_id}) must be a valid id in both vocabularies")
        if problems:
            raise ValueError("invalid ModelConfig: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig keys {unknown}; known keys are {sorted(known)}")
        return cls(**values)
