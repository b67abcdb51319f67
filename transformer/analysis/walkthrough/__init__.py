"""How the model computed one translation, operation by operation, on the sentence's own numbers: the walk-through.

One teacher-forced pass over (source, the translation's own output) records every intermediate the forward pass makes
(every point of core/probes.py), with the translation's heads switched off as it was made. The stages read them for one
source piece and one decoding step, in the order the model runs them: text to ids; into the model; an encoder layer
in full, then every layer compactly; the decoder's inputs; a decoder layer in full (masked self-attention, then
cross-attention, then feed-forward, each with its norm and residual in the checkpoint's order), every layer compactly;
out of the model. Each stage exists at every layer and head (`Walkthrough.variants`), so a page can change either
without asking again. None is computed here that the model did not compute, except what explains it (a vector's
norm, the count of units above zero, which entries a mask removed).

Package layout: context.py (the recorded pass and what builders share), inputs.py, attention.py, layers.py,
output.py (the stage builders: they only read tensors), text.py (every stage's words), stage.py (the typed results).
"""
from __future__ import annotations

from ...core.model import Transformer
from ..registry import Analysis, ModelAccess
from .attention import attention_stages
from .context import WalkContext, record_pass
from .inputs import decoder_inputs, embedding_stages, text_to_ids
from .layers import layer_in_full, layers_compactly
from .output import SLIDER_PIECES, output_stages, step_logits
from .stage import Numbers, Stage, Variants, Walkthrough, same_stage

ENCODER_SUBLAYERS = ["encoder_self", "encoder_ff"]
DECODER_SUBLAYERS = ["decoder_self", "cross", "decoder_ff"]


def context(model, tokenizer, translation, rec, token, step, layer, head) -> WalkContext:
    return WalkContext(model, translation, rec, token, step, layer, head,
                       tokenizer.id_to_piece(model.config.decoder_start_id))


def head_stages(walk: WalkContext) -> dict[str, Stage]:
    """The stages that depend on the head (each attention kind's q, k, v to the weighted sum), by key."""
    attention_stages(walk, "encoder_self", "encoder", "self", walk.token, len(walk.src))
    attention_stages(walk, "decoder_self", "decoder", "self", walk.step, len(walk.decoder_keys))
    attention_stages(walk, "cross", "decoder", "cross", walk.step, len(walk.src))
    return {stage.key: stage for stage in walk.stages}


def stages_at(walk: WalkContext, tokenizer) -> list[Stage]:
    """Every stage of the walk at one layer and one head."""
    token, step = walk.token, walk.step
    text_to_ids(walk, tokenizer)
    embedding_stages(walk, "encoder", token, walk.src[token])
    layer_in_full(walk, "encoder", ENCODER_SUBLAYERS, token, {"encoder_self": len(walk.src)})
    layers_compactly(walk, "encoder", ENCODER_SUBLAYERS, token, walk.src[token])
    decoder_inputs(walk)
    embedding_stages(walk, "decoder", step, walk.inputs[step])
    layer_in_full(walk, "decoder", DECODER_SUBLAYERS, step,
                  {"decoder_self": len(walk.decoder_keys), "cross": len(walk.src)})
    layers_compactly(walk, "decoder", DECODER_SUBLAYERS, step, walk.inputs[step])
    output_stages(walk, tokenizer.id_to_piece)
    return walk.stages


def variants_of(layers: list[list[Stage]], heads: list[list[dict[str, Stage]]]) -> list[Variants]:
    """Each stage's versions from `layers[layer]` (every stage at head 0) and `heads[layer][head]` (the stages that
    depend on the head, by key), kept once when they agree across heads (or across layers too)."""
    out = []
    for index, first in enumerate(layers[0]):
        by_head = [[stages.get(first.key, full[index]) for stages in layer] for full, layer in zip(layers, heads)]
        if not all(same_stage(first, stage) for layer in by_head for stage in layer):
            if all(same_stage(layer[0], stage) for layer in by_head for stage in layer):
                out.append(Variants("layer", [layer[0] for layer in by_head]))
            else:
                out.append(Variants("head", [stage for layer in by_head for stage in layer]))
        else:
            out.append(Variants(None, [first]))
    return out


def version_index(variants: Variants, layer: int, head: int, heads: int) -> int:
    """Which of a stage's versions is at `layer` and `head`."""
    return {None: 0, "layer": layer, "head": layer * heads + head}[variants.per]


def check_position(name: str, value: int, count: int) -> None:
    if not 0 <= value < count:
        raise ValueError(f"{name} must be in [0, {count - 1}], got {value}")


def walkthrough(model: Transformer, tokenizer, translation, token: int = 0, step: int = 0, head: int = 0,
                heads_off=None, layer: int = 0) -> Walkthrough:
    """The walk-through of `translation` (a Translation, with src_ids, tgt_ids and steps) for source position `token`
    and decoding step `step`, at every layer and head, its `stages` at `layer` and `head` (all 0-based), read from one
    teacher-forced pass with `heads_off` switched off."""
    config = model.config
    # one layer and head picker for both stacks: over the widest, each stack showing its last where it has fewer
    n_layers = max(config.encoder.layers, config.decoder.layers)
    n_heads = max(config.encoder.heads, config.decoder.heads)
    check_position("token", token, len(translation.src_ids))
    check_position("step", step, len(translation.tgt_ids))
    check_position("head", head, n_heads)
    check_position("layer", layer, n_layers)
    rec = record_pass(model, translation.src_ids, translation.tgt_ids, heads_off)
    walks = [[context(model, tokenizer, translation, rec, token, step, at_layer, at_head)
              for at_head in range(n_heads)] for at_layer in range(n_layers)]
    layers = [stages_at(layer_walks[0], tokenizer) for layer_walks in walks]  # head 0: every stage
    heads = [[{}] + [head_stages(walk) for walk in layer_walks[1:]] for layer_walks in walks]
    variants = variants_of(layers, heads)
    logits, probs = step_logits(walks[0][0])
    top = probs.topk(min(SLIDER_PIECES, probs.numel())).indices.tolist()
    stacks = {side: config.stack_of(side)._asdict() for side in ("encoder", "decoder")}
    architecture = {"norm": config.norm, "final_norm": config.final_norm, "pos_encoding": config.pos_encoding,
                    "tie_output": config.tie_output, "share_embeddings": config.share_embeddings,
                    "d_model": config.d_model, "n_heads": n_heads, "n_layers": n_layers, "stacks": stacks,
                    "d_k": config.encoder.head_dim, "d_ff": config.encoder.d_ff,
                    "tgt_vocab_size": config.tgt_vocab_size}
    inputs = [tokenizer.id_to_piece(config.decoder_start_id)] + list(translation.tgt_tokens[:-1])
    return Walkthrough(translation.source, translation.text, token, step, layer, head, architecture,
                       list(translation.src_tokens), inputs, list(translation.tgt_tokens),
                       [v.stages[version_index(v, layer, head, n_heads)] for v in variants], variants,
                       logits.numpy(), top, [tokenizer.id_to_piece(i) for i in top])


def walkthrough_analysis(access: ModelAccess, translation, token: int = 0, step: int = 0, head: int = 0,
                         layer: int = 0) -> Walkthrough:
    """The walk-through as a registered analysis: `run_analysis` has switched the translation's heads off around it."""
    return walkthrough(access.model, access.tokenizer, translation, token, step, head, layer=layer)


ANALYSIS = Analysis("walkthrough", "How it computed this", Walkthrough, walkthrough_analysis, cheap=False,
                    description="every operation of the forward pass for one source piece and one decoding step, at "
                                "every layer and head")

__all__ = ["ANALYSIS", "Numbers", "Stage", "Variants", "Walkthrough", "record_pass", "walkthrough",
           "walkthrough_analysis"]
