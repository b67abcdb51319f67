"""One layer of a stack in full at the chosen layer (each sub-layer with its norm and residual in the checkpoint's
order), every layer compactly, and the stack's final norm. Per-layer recordings are (L, T, D)."""
from __future__ import annotations

import numpy as np
import torch

from ...core.head_ref import layer_label
from .attention import attention_stages, output_projection
from .context import WalkContext, norm_of, vector
from .stage import Numbers
from .text import ACTIVATION_NAMES, KIND_NAMES, LAYER_COLUMNS, phrase

SUB_NAMES = {**{kind: name.lower() for kind, name in KIND_NAMES.items()}, "encoder_ff": "feed-forward",
             "decoder_ff": "feed-forward"}
GROUPS = {"encoder_self": "self", "decoder_self": "self", "cross": "cross", "encoder_ff": "ff", "decoder_ff": "ff"}


def norm_stage(walk: WalkContext, side: str, sub: str, position: int, before: torch.Tensor) -> None:
    normed = walk.rec[f"{sub}_residual.normed"][walk.layer_of(side), position]
    placement = phrase("placement.pre" if walk.pre else "placement.post")
    walk.add(f"{side}.{sub}.norm", side, GROUPS[sub], "norm", "norm",
             [vector("in", "x", before), vector("out", "LN(x)", normed),
              Numbers("norm_in", "‖x‖", "scalar", norm_of(before)),
              Numbers("norm_out", "‖LN(x)‖", "scalar", norm_of(normed))],
             ("layer norm", "pre-norm", "post-norm"), where=walk.where(side), sub=SUB_NAMES[sub], placement=placement)


def residual_stage(walk: WalkContext, side: str, sub: str, position: int, before: torch.Tensor) -> torch.Tensor:
    out = walk.rec[f"{sub}_residual.sublayer"][walk.layer_of(side), position]
    total = walk.rec[f"{sub}_residual.sum"][walk.layer_of(side), position]
    what = phrase("what.ff" if sub.endswith("_ff") else "what.attention")
    formula = phrase("residual.pre" if walk.pre else "residual.post")
    walk.add(f"{side}.{sub}.residual", side, GROUPS[sub], "residual", "residual",
             [vector("in", "x", before), vector("added", "sublayer(x)", out), vector("sum", "x + sublayer(x)", total),
              Numbers("added_share", "‖sublayer(x)‖ / ‖x‖", "scalar", norm_of(out) / max(norm_of(before), 1e-30))],
             ("residual stream",), where=walk.where(side), sub=SUB_NAMES[sub], what=what, formula=formula)
    return total


def feed_forward_stages(walk: WalkContext, side: str, position: int) -> None:
    sub, config, layer = f"{side}_ff", walk.config, walk.layer_of(side)
    d_ff = config.stack_of(side).d_ff
    hidden = walk.rec[f"{side}_ff.hidden"][layer, position]
    out = walk.rec[f"{sub}_residual.sublayer"][layer, position]
    firing = int((hidden > 0).sum())
    activation = str(config.activation)
    name = ACTIVATION_NAMES.get(activation, activation)
    after = phrase("after.relu" if activation == "relu" else "after.other", firing=firing, d_ff=d_ff,
                   name=name)
    where = walk.where(side)
    walk.add(f"{side}.{sub}.hidden", side, "ff", "ff.hidden", "ff",
             [vector("hidden", f"{name}(x W₁ + b₁)", hidden), Numbers("firing", "units above 0", "scalar", firing),
              Numbers("units", "hidden units", "scalar", d_ff)], ("feed-forward", "ReLU"),
             where=where, after=after, activation=name)
    walk.add(f"{side}.{sub}.output", side, "ff", "ff.output", "ff",
             [vector("output", "h W₂ + b₂", out), Numbers("norm", "‖out‖", "scalar", norm_of(out))],
             ("feed-forward",), where=where)


def layer_inputs(walk: WalkContext, side: str, position: int) -> torch.Tensor:
    """What each layer of `side` reads at `position`, then the last layer's output, (L + 1, D): the embedding sum,
    then each layer's output."""
    return torch.cat([walk.rec[f"{side}_input"][position][None], walk.rec[f"{side}_hidden"][:, position]])


def layer_in_full(walk: WalkContext, side: str, subs: list[str], position: int, keys: dict[str, int]) -> None:
    """The chosen layer's sub-layers in the checkpoint's order (pre-norm: norm, sub-layer, add; post-norm: sub-layer,
    add, norm)."""
    x = layer_inputs(walk, side, position)[walk.layer_of(side)]
    for sub in subs:
        if walk.pre:
            norm_stage(walk, side, sub, position, x)
        if sub.endswith("_ff"):
            feed_forward_stages(walk, side, position)
        else:
            attention_stages(walk, sub, side, GROUPS[sub], position, keys[sub])
            output_projection(walk, sub, side, GROUPS[sub], position)
        x_after = residual_stage(walk, side, sub, position, x)
        if walk.pre:
            x = x_after
        else:
            norm_stage(walk, side, sub, position, x_after)
            x = walk.rec[f"{sub}_residual.normed"][walk.layer_of(side), position]


def layers_compactly(walk: WalkContext, side: str, subs: list[str], position: int, piece: str) -> None:
    hidden = walk.rec[f"{side}_hidden"][:, position]
    rows, table = [], []
    for layer, (before, after) in enumerate(zip(layer_inputs(walk, side, position), hidden)):
        added = [norm_of(walk.rec[f"{sub}_residual.sublayer"][layer, position]) for sub in subs]
        rows.append(layer_label(layer))
        table.append([norm_of(before), *added, norm_of(after)])
    cols = ["‖input‖", *[LAYER_COLUMNS[s] for s in subs], "‖output‖"]
    walk.add(f"{side}.layers", side, "layers", "layers", "layers",
             [Numbers("layers", "per layer", "matrix", np.array(table), rows=rows, cols=cols, axes=("", ""))],
             ("layer",), side=side, piece=piece)
    if walk.config.final_norm:  # the decoder's is the first step out of the model
        goes = phrase(f"goes.{side}")
        walk.add(f"{side}.final_norm", "output" if side == "decoder" else side, "final", "final_norm", "final_norm",
                 [vector("in", "x_L", hidden[-1]), vector("out", "LN(x_L)", walk.rec[f"{side}_final"][position])],
                 ("layer norm",), side=side.capitalize(), goes=goes)
