"""The model's configuration: one typed dataclass, saved with the weights and rebuilt from them."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import NamedTuple

NORM_PLACEMENTS = ("pre", "post")
# "layer": LayerNorm (mean and variance, weight and bias); "rms": RMS norm (no mean, no bias: T5, Zhang & Sennrich 2019)
NORM_KINDS = ("layer", "rms")
# "relative": no absolute positions; each attention adds a learned bias per head and bucket of key - query distance to
# its scores (T5, Raffel et al. 2020, section 2.1), one table per stack shared by its layers
POSITIONAL_ENCODINGS = ("sinusoidal", "learned", "relative")
# "interleaved": sin at even features, cos at odd ones (the paper, our checkpoints); "halves": sines in the first
# half of the features, cosines in the second (Marian, and Hugging Face's MarianSinusoidalPositionalEmbedding);
# "fairseq": halves too, with frequencies 10000^(-i / (D/2 - 1)) (fairseq, M2M100 and NLLB)
SINUSOIDAL_LAYOUTS = ("interleaved", "halves", "fairseq")
# the feed-forward block's nonlinearity; "swish" is Marian's name for SiLU, x * sigmoid(x); "gelu_tanh": GELU's tanh
# approximation (Hugging Face's "gelu_new", T5 v1.1 and FLAN-T5)
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swish", "silu")
# each stack's own shape, field by field: (shared default, the encoder's field, the decoder's field)
# the fields the Hugging Face families brought (models/convert.py); to_dict leaves them out at their defaults, so a
# model of ours writes the config.json it always did
FAMILY_FIELDS = ("head_dim", "norm_kind", "norm_eps", "embedding_norm", "decoder_positions", "position_offset",
                 "relative_buckets", "relative_max_distance", "attention_scale", "gated_ff")
STACK_FIELDS = (("n_layers", "encoder_layers", "decoder_layers"), ("n_heads", "encoder_heads", "decoder_heads"),
                ("d_ff", "encoder_ff", "decoder_ff"))


class StackShape(NamedTuple):
    """One stack's shape: its layers, the heads of each of its attentions and its feed-forward width."""

    layers: int
    heads: int
    d_ff: int
    head_dim: int  # d_model / heads, unless the config sets its own (T5's d_kv)


@dataclass
class ModelConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 256
    n_heads: int = 4  # heads of every attention, in each stack whose own count below is unset
    n_layers: int = 3  # layers in each stack (encoder and decoder) whose own count below is unset
    d_ff: int = 1024  # hidden width of the position-wise feed-forward block, likewise
    # Each stack's own shape (a distilled OPUS-MT student has a deep encoder and a shallow decoder): None takes the
    # shared value above, which is all a checkpoint written before these fields holds. Read them as `config.encoder`
    # and `config.decoder`; after construction they are always set.
    encoder_layers: int | None = None
    encoder_heads: int | None = None
    encoder_ff: int | None = None
    decoder_layers: int | None = None
    decoder_heads: int | None = None
    decoder_ff: int | None = None
    # each head's width; None: d_model / heads. T5 sets its own (d_kv), so heads x head_dim may differ from d_model
    head_dim: int | None = None
    dropout: float = 0.1  # on embeddings and on every sub-layer's output before the residual add
    attention_dropout: float = 0.0  # on attention probabilities (training only; captured values are pre-dropout)
    max_len: int = 256  # longest sequence the positional table covers
    norm: str = "pre"  # "pre": LayerNorm before each sub-layer (stable); "post": after the residual add (the paper)
    final_norm: bool = True  # a LayerNorm after the last layer of each stack (needed with pre-norm)
    norm_kind: str = "layer"  # one of NORM_KINDS: every norm of the model is of this kind
    norm_eps: float = 1e-5  # added to the variance in every norm (torch's LayerNorm default; T5: 1e-6)
    embedding_norm: bool = False  # a norm on embedding + position, before the first layer (BART's layernorm_embedding)
    pos_encoding: str = "sinusoidal"  # one of POSITIONAL_ENCODINGS: a fixed buffer (the paper), a table, T5's bias
    # the decoder reads its own learned table (BART, mBART); else both stacks read one
    decoder_positions: bool = False
    # the first token's position: BART's and mBART's learned tables start at row 2, M2M100's sinusoids at pad_id + 1
    position_offset: int = 0
    relative_buckets: int = 32  # "relative": buckets of key - query distance (T5's relative_attention_num_buckets)
    relative_max_distance: int = 128  # "relative": distances from here on share the last bucket
    attention_scale: bool = True  # scores divided by sqrt(head size) (section 3.2.1); T5 folds that into its weights
    gated_ff: bool = False  # feed-forward act(x W_gate) * (x W_1) W_2 (Shazeer 2020, T5 v1.1's "gated-gelu")
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
        for shared, *own in STACK_FIELDS:
            for name in own:
                if getattr(self, name) is None:
                    setattr(self, name, getattr(self, shared))
        problems = []
        stacks = (name for group in STACK_FIELDS for name in group)
        sizes = ("src_vocab_size", "tgt_vocab_size", "d_model", "max_len", *stacks)
        for name in sizes:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if not problems and self.head_dim is None:  # with its own head_dim, heads x head_dim need not be d_model
            for name in ("n_heads", "encoder_heads", "decoder_heads"):
                if name != "n_heads" and getattr(self, name) == self.n_heads:
                    continue  # the shared count, checked (and named) once
                if self.d_model % getattr(self, name):
                    problems.append(f"d_model ({self.d_model}) must be divisible by {name} ({getattr(self, name)})")
        if self.head_dim is not None and (not isinstance(self.head_dim, int) or isinstance(self.head_dim, bool)
                                          or self.head_dim < 1):
            problems.append(f"head_dim must be a positive integer or null, got {self.head_dim!r}")
        for name, low in (("position_offset", 0), ("relative_buckets", 2), ("relative_max_distance", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                problems.append(f"{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(self.norm_eps, (int, float)) or isinstance(self.norm_eps, bool) or not 0 < self.norm_eps < 1:
            problems.append(f"norm_eps must be a number in (0, 1), got {self.norm_eps!r}")
        if self.decoder_positions is True and self.pos_encoding != "learned":
            problems.append("decoder_positions (a learned table of the decoder's own) needs pos_encoding 'learned'")
        if self.norm_kind not in NORM_KINDS:
            problems.append(f"norm_kind must be one of {NORM_KINDS}, got {self.norm_kind!r}")
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
        for name in ("final_norm", "share_embeddings", "tie_output", "scale_embedding", "embedding_norm",
                     "decoder_positions", "attention_scale", "gated_ff"):
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
    def encoder(self) -> StackShape:
        return StackShape(self.encoder_layers, self.encoder_heads, self.encoder_ff,
                          self.head_dim or self.d_model // self.encoder_heads)

    @property
    def decoder(self) -> StackShape:
        return StackShape(self.decoder_layers, self.decoder_heads, self.decoder_ff,
                          self.head_dim or self.d_model // self.decoder_heads)

    @property
    def same_stacks(self) -> bool:
        """Whether the encoder and the decoder have one shape (every model trained here; most Marian models)."""
        return self.encoder == self.decoder

    def stacks_text(self) -> str:
        """The stacks' shape as the model cards say it: "3 + 3 layers, 4 heads of size 64, feed-forward 1,024", or
        each stack's own when they differ."""
        def shape(stack: StackShape) -> str:
            return f"{stack.heads} heads of size {stack.head_dim}, feed-forward {stack.d_ff:,}"

        if self.same_stacks:
            return f"{self.encoder.layers} + {self.decoder.layers} layers, {shape(self.encoder)}"
        return (f"{self.encoder.layers} encoder layers ({shape(self.encoder)}) + {self.decoder.layers} decoder layers "
                f"({shape(self.decoder)})")

    def stack_of(self, kind: str) -> StackShape:
        """The shape of the stack an attention kind or a probe belongs to: "encoder_..." the encoder's, every other
        ("decoder_...", "cross") the decoder's."""
        return self.encoder if kind.startswith("encoder") else self.decoder

    def to_dict(self) -> dict:
        """The fields, a stack's own shape only where it differs from the shared one: a model whose stacks share a
        shape writes the config.json it always did."""
        values = asdict(self)
        defaults = {f.name: f.default for f in fields(self)}
        for name in FAMILY_FIELDS:
            if values[name] == defaults[name]:
                del values[name]
        for shared, *own in STACK_FIELDS:
            for name in own:
                if values[name] == values[shared]:
                    del values[name]
        return values

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig keys {unknown}; known keys are {sorted(known)}")
        return cls(**values)
