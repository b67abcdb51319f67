"""The encoder-decoder Transformer (Vaswani et al., 2017): its inputs (token embeddings and positional encodings),
its two stacks (layers.py, whose attention is attention.py) and its output projection. These three files hold one
forward pass; what the modules can record is declared on each (`records`, see probes.py).

Shapes: B batch, S source length, T target length, D d_model, V target vocabulary size.
src (B, S) and tgt (B, T) are LongTensors of token ids; `pad_id` marks padding.
"""
from __future__ import annotations

import contextlib
import math
import threading

import torch
from torch import nn

from .attention import stack_separate_projections
from .config import ModelConfig
from .half_linear import attach_half_weights, detach_half_weights, project
from .layers import DecoderCache, DecoderLayer, EncoderLayer, LayerCache, build_norm
from .positions import RelativePositionBias, build_positions
from .probes import PROBES, active_patches, add_taps, any_recorded, name_taps, tap


class TokenEmbedding(nn.Module):
    """Token embedding scaled by sqrt(D) (section 3.4), so it is not drowned by the positional part; unscaled
    (`scale_embedding=False`) in models trained that way."""

    def __init__(self, vocab_size: int, d_model: int, scaled: bool = True):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model) if scaled else 1.0

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, tokens):
        return self.embedding(tokens) * self.scale


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, L) -> (B, 1, 1, L): True for real keys."""
    return (tokens != pad_id)[:, None, None, :]


def target_padding_mask(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    """`padding_mask` of decoder inputs (B, T), position 0 always real: it holds the decoder's start token, which
    is <pad> itself in Marian models."""
    mask = padding_mask(tgt, pad_id).clone()
    mask[..., 0] = True
    return mask


def causal_mask(length: int, device) -> torch.Tensor:
    """(T, T): True on and below the diagonal, so position i sees positions 0..i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def upgrade_state_dict(module, state_dict, prefix, *args) -> None:
    """Lets load_state_dict read the separate q/k/v projections of checkpoints written before they were stacked."""
    upgraded = stack_separate_projections(state_dict)
    state_dict.clear()
    state_dict.update(upgraded)


INIT_LOCK = threading.Lock()  # two models built at once on the meta device restore the same functions


def meta_skipped(function):
    """`function` of torch.nn.init, doing nothing to a tensor on the meta device."""
    def init(tensor, *args, **kwargs):
        return tensor if tensor.is_meta else function(tensor, *args, **kwargs)
    return init


@contextlib.contextmanager
def initialisation_skipped():
    """torch.nn.init's functions skip tensors on the meta device for a while (Hugging Face's `no_init_weights`
    does the like). They would compute nothing there, but the first of them imports torch._dynamo: about a second of
    every process that loads a model. A model built meanwhile on another thread, on the CPU, is initialised as
    always."""
    with INIT_LOCK:
        names = [name for name in dir(nn.init) if name.endswith("_") and not name.startswith("_")]
        saved = {name: getattr(nn.init, name) for name in names}
        try:
            for name, function in saved.items():
                setattr(nn.init, name, meta_skipped(function))
            yield
        finally:
            for name, function in saved.items():
                setattr(nn.init, name, function)


class Transformer(nn.Module):
    PROBES = PROBES  # the sets `record` assembles for the views, by name (probes.py)
    # the points outside the layers (each layer's own are declared by its modules)
    records = {
        **{f"{side}_{part}": f"the {side}'s {about}" for side in ("encoder", "decoder") for part, about in (
            ("embedding_row", "embedding rows of the input ids, (B, T, D), before any scaling"),
            ("embedding_scaled", "embedding rows times the embedding scale, (B, T, D)"),
            ("positions", "positional encoding of each position, (B, T, D)"),
            ("input", "scaled embedding + positional encoding (through the embedding norm where the model has one), "
                      "the first layer's input, (B, T, D)"),
            ("final", "stack's final norm output (the identity without one), (B, T, D); the encoder's is the memory"))},
        "logits": "the output projection's logits, (B, T, V)",
    }

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.src_embed = TokenEmbedding(config.src_vocab_size, config.d_model, config.scale_embedding)
        self.tgt_embed = (self.src_embed if config.share_embeddings
                          else TokenEmbedding(config.tgt_vocab_size, config.d_model, config.scale_embedding))
        self.positions = build_positions(config)
        # the decoder's: the same table, or its own (BART, mBART)
        self.target_positions = build_positions(config) if config.decoder_positions else self.positions
        # T5: one relative position bias per stack, shared by its layers
        relative = config.pos_encoding == "relative"
        self.encoder_position_bias = RelativePositionBias(config, config.encoder.heads, True) if relative else None
        self.decoder_position_bias = RelativePositionBias(config, config.decoder.heads, False) if relative else None
        # BART's and mBART's layernorm_embedding, one per stack
        self.encoder_embedding_norm = build_norm(config) if config.embedding_norm else nn.Identity()
        self.decoder_embedding_norm = build_norm(config) if config.embedding_norm else nn.Identity()
        self.embed_dropout = nn.Dropout(config.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.encoder.layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder.layers))
        self.encoder_norm = build_norm(config) if config.final_norm else nn.Identity()
        self.decoder_norm = build_norm(config) if config.final_norm else nn.Identity()
        self.generator = nn.Linear(config.d_model, config.tgt_vocab_size)
        if config.tie_output:
            self.generator.weight = self.tgt_embed.weight
        add_taps(self)
        name_taps(self)
        self.apply(self._init_weights)
        self.register_load_state_dict_pre_hook(upgrade_state_dict)
        # decoding steps run every decoder layer in one call of the compiled kernel where it computes the same as
        # the Python step (core/fused_step.py); False keeps the Python step (benchmarks, tests)
        self.fused_decoding = True
        # opt-in: the kernel reads int8 copies of the decoder's projections (one scale per output) instead of the
        # exact float16 ones: half the bytes, but not the same numbers (docs/speed.md: what it changes, measured
        # with BLEU)
        self.int8_decoding = False

    @classmethod
    def empty(cls, config: ModelConfig) -> "Transformer":
        """The model with memory for every saved tensor but nothing initialised, for a checkpoint to fill at once:
        built on the meta device, then given CPU memory, and its tables derived from the config computed again. A
        600M-parameter model loads in a few seconds this way, never holding two copies of its weights."""
        with torch.device("meta"), initialisation_skipped():
            model = cls(config)
        model.to_empty(device="cpu")  # a Parameter leaving the meta device is a new one: a tied one is tied again
        if config.tie_output:
            model.generator.weight = model.tgt_embed.weight
        with torch.no_grad():
            for module in model.modules():
                if hasattr(module, "computed"):  # the positional tables: derived, not saved
                    module.table = module.computed()
        return model

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # Xavier-uniform projections as in the reference implementation (tensor2tensor / fairseq);
        # embeddings ~ N(0, D^-0.5) so that after the sqrt(D) scaling they have unit variance.
        if isinstance(module, nn.Linear):
            # a stacked q | k | v projection is three D x D matrices, each initialised as one
            for block in module.weight.chunk(getattr(module, "stacked_projections", 1)):
                nn.init.xavier_uniform_(block)
            nn.init.zeros_(module.bias)
        elif isinstance(module, TokenEmbedding):
            nn.init.normal_(module.embedding.weight, std=module.embedding.weight.size(1) ** -0.5)

    @property
    def device(self) -> torch.device:
        return self.generator.bias.device

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def use_half_weights(self, enabled: bool) -> int:
        """Decoding reads float16 copies of the weights that float16 holds exactly (core/half_linear.py): the
        same numbers, half the bytes. Returns how many layers got one."""
        if not enabled:
            detach_half_weights(self)
            return 0
        return attach_half_weights(self)

    def use_fused_attention(self, fused: bool) -> None:
        for module in self.modules():
            if hasattr(module, "fused"):
                module.fused = fused

    def embed(self, tokens: torch.Tensor, embedding: TokenEmbedding, start: int = 0,
              side: str = "encoder") -> torch.Tensor:
        length = tokens.size(1)
        if start + length > self.config.max_len:
            raise ValueError(
                f"sequence of {start + length} positions exceeds the model's max_len {self.config.max_len}"
            )
        positions = (self.positions if side == "encoder" else self.target_positions)(start, length)
        positions = positions.to(embedding.weight.dtype)
        norm = getattr(self, f"{side}_embedding_norm")
        parts = ("embedding_row", "embedding_scaled", "positions", "input")
        if not (active_patches.get() or any_recorded([getattr(self, f"{side}_{part}") for part in parts])):
            return self.embed_dropout(norm(embedding(tokens) + positions))
        # the walk-through records each part of the sum; a patch may replace any of them (noise on one word)
        row = tap(getattr(self, f"{side}_embedding_row"), embedding.embedding(tokens))
        scaled = tap(getattr(self, f"{side}_embedding_scaled"), row * embedding.scale)
        positions = tap(getattr(self, f"{side}_positions"), positions.expand_as(scaled))
        return self.embed_dropout(tap(getattr(self, f"{side}_input"), norm(scaled + positions)))

    def position_bias(self, side: str, start: int, length: int) -> torch.Tensor | None:
        """The relative position bias (1, H, length, start + length) of queries start.. over every key up to the
        last of them, or None without relative positions."""
        bias = getattr(self, f"{side}_position_bias")
        return None if bias is None else bias(start, length, start + length)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, S) -> memory (B, S, D)."""
        if src_mask is None:
            src_mask = padding_mask(src, self.config.pad_id)
        x = self.embed(src, self.src_embed)
        bias = self.position_bias("encoder", 0, src.size(1))
        for layer in self.encoder_layers:
            x = layer(x, src_mask, bias)
        return tap(self.encoder_final, self.encoder_norm(x))

    def decode(self, memory, src_mask, tgt, tgt_mask=None) -> torch.Tensor:
        """Teacher-forced decoding of the whole target prefix: (B, T) -> logits (B, T, V)."""
        normed = tap(self.decoder_final, self.decoder_norm(self.decoder_layers_output(memory, src_mask, tgt, tgt_mask)))
        return tap(self.logits, self.generator(normed))

    def decoder_layers_output(self, memory, src_mask, tgt, tgt_mask=None) -> torch.Tensor:
        """(B, T) -> the last decoder layer's output (B, T, D), before the final norm and the output projection."""
        if tgt_mask is None:
            tgt_mask = target_padding_mask(tgt, self.config.pad_id) & causal_mask(tgt.size(1), tgt.device)
        x = self.embed(tgt, self.tgt_embed, side="decoder")
        bias = self.position_bias("decoder", 0, tgt.size(1))
        for layer in self.decoder_layers:
            x = layer(x, memory, src_mask, tgt_mask, bias=bias)
        return x

    def layers_pass(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Runs the source (B, S) and the target prefix (B, T) through every layer, teacher-forced, and stops
        before the final norm and the output projection: for analyses that read the layers through hooks or
        probes, since the (T, V) logits cost the most of a pass. Returns the last decoder layer's output."""
        src_mask = padding_mask(src, self.config.pad_id)
        return self.decoder_layers_output(self.encode(src, src_mask), src_mask, tgt)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = padding_mask(src, self.config.pad_id)
        return self.decode(self.encode(src, src_mask), src_mask, tgt)

    def new_cache(self) -> DecoderCache:
        return DecoderCache(layers=[LayerCache() for _ in self.decoder_layers])

    def decode_step(self, memory, src_mask, last_tokens: torch.Tensor, cache: DecoderCache) -> torch.Tensor:
        """One incremental step: the newest target token per row (B,) -> next-token logits (B, V).

        Past keys/values come from `cache`, which this call extends. No mask is needed for decoder
        self-attention: the cache only holds earlier positions, which the new query may all see. Every decoder-side
        point `decode` passes, this step passes too, for its one new position (B, 1, ...).
        """
        x = self.embed(last_tokens[:, None], self.tgt_embed, start=cache.length, side="decoder")
        bias = self.position_bias("decoder", cache.length, 1)
        for layer, layer_cache in zip(self.decoder_layers, cache.layers):
            x = layer(x, memory, src_mask, None, layer_cache, bias)
        cache.length += 1
        normed = tap(self.decoder_final, self.decoder_norm(x))
        return tap(self.logits, project(normed, self.generator))[:, -1]
