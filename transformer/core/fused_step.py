"""Every decoder layer's incremental step in one call of the compiled kernel (`fused_step.cpp`).

Why: at one new position per step, the decoder's arithmetic is small (the float16 matrix products read 12 MB of
weights) and the ~90 ATen operator calls around it (norms, reshapes, softmaxes, residual adds) cost more than that
arithmetic. The kernel runs the same pre-norm layers, the final norm and the output projection in C++ on the same
float16 weight copies (half_linear.py), with the self-attention cache preallocated to the model's max_len.

It runs where it computes what the Python step would: the kernel built, a pre-norm ReLU model with a final norm in eval
mode on the CPU, every weight's float16 copy current, at most MAX_ROWS rows, no heads switched off in this context,
and open recordings asking for nothing but the decoder's attention probabilities and layer outputs, which it
records as the forward hooks would. Anything else decodes through `Transformer.decode_step`. Its numbers equal the
Python step's to float32 rounding (tests); `model.fused_decoding = False` turns it off.

Shapes: B rows, H heads, C the cache's capacity (max_len), S source length, hs head size, D d_model.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .half_linear import KERNEL, MAX_ROWS
from .head_mask import masked_heads
from .probes import active_patches, active_recordings


@dataclass
class FusedWeights:
    """The tensors `fused_step.cpp` reads, in its order (its projections packed: `pack`), and the versions of the
    weights they were taken at."""

    tensors: list[torch.Tensor]
    versions: tuple[tuple[int, int], ...]  # (id, version) of every parameter they were taken from
    eps: float
    scales: list[torch.Tensor] = field(default_factory=list)  # int8 projections' per-output scales; [] for float16


@dataclass
class Layout:
    """The modules the kernel reads and records, found once per model (its structure does not change)."""

    linears: list  # per layer: self q|k|v, self output, cross q|k|v, cross output, fc1, fc2; then the generator
    norms: list  # per layer: self-attention, cross-attention, feed-forward; then the final norm
    recorded: tuple[list, list, list]  # per layer: self-attention probabilities, cross-attention ones, the layer output
    recorded_ids: frozenset[int]
    decoder_ids: frozenset[int]  # every module a decoding step runs


def layout(model) -> Layout:
    cached = getattr(model, "_fused_layout", None)
    if cached is not None:
        return cached
    linears, norms = [], []
    for layer in model.decoder_layers:
        linears += [layer.self_attention.in_proj, layer.self_attention.out_proj, layer.cross_attention.in_proj,
                    layer.cross_attention.out_proj, layer.feed_forward.fc1, layer.feed_forward.fc2]
        norms += [
            layer.self_attention_residual.norm,
            layer.cross_attention_residual.norm,
            layer.feed_forward_residual.norm,
        ]
    layers = list(model.decoder_layers)
    recorded = (
        [layer.self_attention.weights for layer in layers],
        [layer.cross_attention.weights for layer in layers],
        [layer.output for layer in layers],
    )
    # the model's own points a step passes too (the decoder's input embedding, its final norm's output, the logits)
    decoder = [*model.decoder_layers.modules(), *model.decoder_norm.modules(), *model.generator.modules(),
               model.decoder_embedding_row, model.decoder_embedding_scaled, model.decoder_positions,
               model.decoder_input, model.decoder_final, model.logits]
    model._fused_layout = Layout(linears + [model.generator], norms + [model.decoder_norm], recorded,
                                 frozenset(id(m) for group in recorded for m in group), frozenset(map(id, decoder)))
    return model._fused_layout


BLOCK = 64  # outputs per block of a packed projection (half_linear.h's kBlock)


def pack(half: torch.Tensor) -> torch.Tensor:
    """A float16 projection (N, K) as the kernel reads it: (ceil(N / 64), K, 64), block b holding outputs
    b * 64 .. b * 64 + 63 for each k in turn, the last block padded with zeros."""
    outputs, width = half.shape
    blocks = -(-outputs // BLOCK)
    padded = torch.zeros(blocks * BLOCK, width, dtype=half.dtype)
    padded[:outputs] = half
    return padded.view(blocks, BLOCK, width).transpose(1, 2).contiguous()


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A float32 projection (N, K) as int8 with one symmetric scale per output, packed as `pack` packs float16:
    W[n] ~ q[n] * scale[n] with q in [-127, 127] and scale[n] = max |W[n]| / 127 (1 for a row of zeros)."""
    weight = weight.detach().float()
    scales = weight.abs().amax(dim=1) / 127
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    quantized = torch.round(weight / scales[:, None]).clamp_(-127, 127).to(torch.int8)
    return pack(quantized), scales.contiguous()


def arrange(half: torch.Tensor) -> torch.Tensor:
    """A projection as the kernel reads it on this CPU: packed where it has AVX-512, else row-major as it is."""
    return pack(half) if KERNEL.module.has_avx512() else half.contiguous()


def fused_weights(model) -> FusedWeights | None:
    """The model's tensors for the kernel, kept on the model while its weights stay unchanged: its float16 copies,
    or with `model.int8_decoding` int8 ones quantized here. None where a float16 copy is missing or stale
    (half_linear.attach_half_weights keeps none for weights float16 would round)."""
    plan = layout(model)
    linears, norms = plan.linears, plan.norms
    int8 = model.int8_decoding
    halves = [getattr(linear, "half_weight", None) for linear in linears]
    if not int8 and any(
        half is None or half.version != linear.weight._version for half, linear in zip(halves, linears)
    ):
        return None
    parameters = [p for module in linears + norms for p in (module.weight, module.bias)]
    versions = tuple((id(p), p._version) for p in parameters)
    cached = getattr(model, "_fused_weights", None)
    if cached is not None and cached.versions == versions and bool(cached.scales) == int8:  # int8 ones carry scales
        return cached
    d = model.config.d_model
    # the cross-attention's query rows alone: its keys and values are computed once per sentence
    cross_queries = {6 * layer + 2 for layer in range(len(model.decoder_layers))}
    if int8:  # quantized from the float32 weights
        quantized = [
            quantize(linear.weight[:d] if i in cross_queries else linear.weight) for i, linear in enumerate(linears)
        ]
        projections, scales = [q for q, _ in quantized], [scale for _, scale in quantized]
    else:
        projections = [arrange(h.tensor[:d] if i in cross_queries else h.tensor) for i, h in enumerate(halves)]
        scales = []
    tensors = []
    for index, layer in enumerate(model.decoder_layers):
        self_attention, cross = layer.self_attention, layer.cross_attention
        ff = layer.feed_forward
        layer_norms = norms[3 * index: 3 * index + 3]
        own = projections[6 * index: 6 * index + 6]
        tensors += [layer_norms[0].weight, layer_norms[0].bias, own[0], self_attention.in_proj.bias, own[1],
                    self_attention.out_proj.bias,
                    layer_norms[1].weight, layer_norms[1].bias, own[2], cross.in_proj.bias[:d], own[3],
                    cross.out_proj.bias,
                    layer_norms[2].weight, layer_norms[2].bias, own[4], ff.fc1.bias, own[5], ff.fc2.bias]
    tensors += [model.decoder_norm.weight, model.decoder_norm.bias, projections[-1], model.generator.bias]
    model._fused_weights = FusedWeights([t.detach().contiguous() for t in tensors], versions, norms[0].eps, scales)
    return model._fused_weights


def unfit_architecture(config) -> str | None:
    """Why the kernel cannot run a model of this configuration whatever the context (its layers' shape or its
    activation), else None: what the app's footer names per model."""
    if config.norm != "pre" or not config.final_norm:
        shape = f"{config.norm}-norm {'with' if config.final_norm else 'without'} a final norm"
        return f"the kernel runs pre-norm layers with a final norm; this model is {shape}"
    if config.activation != "relu" or config.gated_ff:
        kind = f"gated {config.activation}" if config.gated_ff else config.activation
        return f"the kernel's feed-forward is ReLU; this model's is {kind}"
    if config.norm_kind != "layer":
        return f"the kernel's norms are LayerNorms; this model's are {config.norm_kind} norms"
    if config.pos_encoding == "relative":
        return "the kernel adds no relative position bias (T5's positions)"
    if not config.attention_scale or config.embedding_norm:
        return ("the kernel scales the scores by 1/sqrt(head size) and has no embedding norm; this model "
                + ("does not scale them" if not config.attention_scale else "has an embedding norm"))
    if any(stack.heads * stack.head_dim != config.d_model for stack in (config.encoder, config.decoder)):
        return "the kernel's heads together are d_model wide; this model sets its own head_dim"
    return None


def why_not_fused(model, rows: int) -> str | None:
    """None when `FusedStep.start` would run the kernel for `rows` rows in this context, else the reason."""
    config = model.config
    if not model.fused_decoding:
        return "switched off (model.fused_decoding = False)"
    if KERNEL.module is None or not hasattr(KERNEL.module, "decoder_step"):
        return f"the compiled kernel is {KERNEL.status}"
    if model.training or model.device.type != "cpu" or model.generator.weight.dtype != torch.float32:
        return "the kernel decodes float32 models in eval mode on the CPU"
    if unfit_architecture(config):
        return unfit_architecture(config)
    if model.int8_decoding and not KERNEL.module.has_avx512():
        return "int8 decoding (model.int8_decoding) needs an AVX-512 CPU"
    if rows > MAX_ROWS:
        return f"{rows} rows: the float16 kernel pays off up to {MAX_ROWS}"
    if masked_heads.get():
        return "heads are switched off in this context"
    plan = layout(model)
    if any(n.eps != plan.norms[0].eps or n.weight is None for n in plan.norms):
        return "the kernel needs affine norms with one eps"
    if active_patches.get():
        return "a patch is open (core/patching.py): the Python step reaches every point"
    if any((recording.module_ids & plan.decoder_ids) - plan.recorded_ids for recording in active_recordings.get()):
        return "an open recording asks for more than the decoder's attention and layer outputs"
    return None if fused_weights(model) is not None else "a weight has no current float16 copy"


class FusedStep:
    """The decoding state of a batch of rows on the kernel: the self-attention cache, preallocated, and the
    cross-attention's keys and values, computed once per sentence and shared by that sentence's rows."""

    def __init__(self, model, weights: FusedWeights, memory: torch.Tensor, src_mask: torch.Tensor | None):
        config = model.config
        batch, length, d = memory.shape
        heads = config.decoder.heads
        shape = (batch, heads, config.max_len, d // heads)
        self.model, self.weights, self.heads, self.length = model, weights, heads, 0
        # what every step reads, looked up once: module attribute lookups cost more than the rest of a step's Python
        self.token_embedding, self.embedding_scale = model.tgt_embed.weight.detach(), model.tgt_embed.scale
        self.position_table, self.max_len = model.target_positions.table.detach(), config.max_len
        self.self_keys = [torch.empty(shape) for _ in model.decoder_layers]
        self.self_values = [torch.empty(shape) for _ in model.decoder_layers]
        self.cross_keys, self.cross_values = [], []
        for layer in model.decoder_layers:
            keys, values = layer.cross_attention.project_keys_values(memory)  # (B, H, S, hs) each
            self.cross_keys.append(keys.contiguous())
            self.cross_values.append(values.contiguous())
        self.source_rows = torch.arange(batch)  # (B,) the sentence of each row
        # 0 where a sentence's key is a source token, -inf where it is padding; None when none is padded
        self.source_bias = None
        if src_mask is not None:
            real = src_mask.reshape(batch, length)
            self.source_bias = torch.zeros(batch, length).masked_fill_(~real, float("-inf"))
        plan = layout(model)
        self.recorded, self.recorded_ids = plan.recorded, plan.recorded_ids

    @classmethod
    def start(cls, model, memory: torch.Tensor, src_mask: torch.Tensor | None) -> "FusedStep | None":
        """The kernel's state for these rows, or None where the Python step must run (see `why_not_fused`)."""
        if why_not_fused(model, memory.size(0)) is not None:
            return None
        return cls(model, model._fused_weights, memory, src_mask)  # why_not_fused has just checked them

    def records(self) -> bool:
        """Whether an open recording in this context listens to a point the kernel's step records (`greedy`'s loop
        records none)."""
        recordings = active_recordings.get()
        return bool(recordings) and any(r.module_ids & self.recorded_ids for r in recordings)

    def step(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """The newest token per row (B,) -> next-token logits (B, V); records into the open recordings."""
        if self.length >= self.max_len:  # the message Transformer.embed gives
            raise ValueError(f"sequence of {self.length + 1} positions exceeds the model's max_len {self.max_len}")
        recordings = active_recordings.get()
        record = self.records()
        out = KERNEL.module.decoder_step(
            last_tokens.contiguous(),
            self.token_embedding,
            self.embedding_scale,
            self.position_table,
            self.weights.tensors,
            self.self_keys,
            self.self_values,
            self.cross_keys,
            self.cross_values,
            self.source_rows,
            self.source_bias,
            self.length,
            self.heads,
            self.weights.eps,
            record,
            self.weights.scales,
        )
        self.length += 1
        if record:
            layers = len(self.self_keys)
            recorded = (out[1: 1 + layers], out[1 + layers: 1 + 2 * layers], out[1 + 2 * layers:])
            for recording in recordings:
                for modules, tensors in zip(self.recorded, recorded):
                    for module, tensor in zip(modules, tensors):
                        if id(module) in recording.module_ids:
                            recording.add(module.name, tensor)
        return out[0]

    def greedy(self, token: int, never_produced: torch.Tensor, eos: int, limit: int, topk: int) -> list[torch.Tensor]:
        """One row decoded greedily from `token`, the whole loop in the kernel (fused_step.cpp's greedy_steps): the
        chosen ids (T,), their probabilities (T,), each step's best `topk` ids and probabilities (T, k). It records
        nothing: callers decode step by step while `records()`."""
        if self.length + limit > self.max_len:  # the message Transformer.embed gives
            raise ValueError(f"sequence of {self.length + limit} positions exceeds the model's max_len {self.max_len}")
        out = KERNEL.module.greedy_steps(torch.tensor([token]), self.token_embedding, self.embedding_scale,
                                         self.position_table, self.weights.tensors, self.self_keys, self.self_values,
                                         self.cross_keys, self.cross_values, self.source_rows, self.source_bias,
                                         self.length, self.heads, self.weights.eps, never_produced, eos, limit, topk,
                                         self.weights.scales)
        self.length += len(out[0])
        return out

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keeps rows `rows` (R,) in that order; rows may repeat (beam search copies hypotheses)."""
        layers = len(self.self_keys)
        selected = KERNEL.module.select_rows(self.self_keys + self.self_values, rows, self.length)
        self.self_keys, self.self_values = selected[:layers], selected[layers:]
        self.source_rows = self.source_rows.index_select(0, rows)
