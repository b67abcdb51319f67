"""The model's configuration: one typed dataclass, saved with the weights and rebuilt from them."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

NORM_PLACEMENTS = ("pre", "post")
POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
# "interleaved": sin at even features, cos at odd ones (the paper, our checkpoints); "halves": sines in the first
# half of the features, cosines in the second (Marian, and Hugging Face's MarianSinusoidalPositionalEmbedding)
SINUSOIDAL_LAYOUTS = ("interleaved", "halves")
# the feed-forward block's nonlinearity; "swish" is Marian's name for SiLU, x * sigmoid(x)
ACTIVATIONS = ("relu", "gelu", "swish", "silu")


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
    activation: str = "relu"  # the feed-forward nonlinearity, one of ACTIVATIONS (gelu: the exact erf form)
    sinusoidal_layout: str = "interleaved"  # where sines and cosines sit in the fixed table, one of SINUSOIDAL_LAYOUTS
    scale_embedding: bool = True  # token embeddings times sqrt(d_model) (section 3.4); Marian's `scale_embedding`
    # The output projection `generator` always carries a bias: trained in our checkpoints, Marian's fixed
    # `final_logits_bias` in converted ones (zeros in most OPUS-MT models), so no field switches it.
    pad_id: int = 0  # padding id: masked out as a key and ignored by the loss
    unk_id: int = 1  # the unknown piece, what a deleted source piece becomes (analysis/faithfulness.py)
    # the first decoder input of every translation: <s> in our checkpoints; Marian starts from <pad>, which is then
    # a real key at position 0 (the decoder's padding mask never hides position 0)
    decoder_start_id: int = 2
    eos_id: int = 3  # ends every source and every translation

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
        if self.activation not in ACTIVATIONS:
            problems.append(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.sinusoidal_layout not in SINUSOIDAL_LAYOUTS:
            problems.append(f"sinusoidal_layout must be one of {SINUSOIDAL_LAYOUTS}, got {self.sinusoidal_layout!r}")
        for name in ("final_norm", "share_embeddings", "tie_output", "scale_embedding"):
            if not isinstance(getattr(self, name), bool):
                problems.append(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            problems.append(
                "share_embeddings needs src_vocab_size == tgt_vocab_size "
                f"(got {self.src_vocab_size} and {self.tgt_vocab_size}); use a joint vocabulary or set it False"
            )
        if not problems:
            for name in ("pad_id", "unk_id", "decoder_start_id", "eos_id"):
                value = getattr(self, name)
                if (not isinstance(value, int) or isinstance(value, bool)
                        or not 0 <= value < min(self.src_vocab_size, self.tgt_vocab_size)):
                    problems.append(f"{name} must be a valid id in both vocabularies, in "
                                    f"[0, {min(self.src_vocab_size, self.tgt_vocab_size)}), got {value!r}")
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
