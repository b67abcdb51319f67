"""Out of the model at the chosen step: the logits, the softmax over the pieces that can be produced, the choice."""
from __future__ import annotations

import numpy as np

from ...core.head_ref import shown
from ...decoding.step_decoder import forbid_never_produced
from .context import WalkContext
from .stage import Numbers
from .text import STRATEGY_TEXT, phrase

TOP_CANDIDATES = 10
SLIDER_PIECES = 50  # the pieces the output's sliders name; the probabilities cover the whole vocabulary


def step_logits(walk: WalkContext):
    """The step's logits with the never-produced pieces at -inf (what the softmax reads), and their softmax."""
    forbidden = forbid_never_produced(walk.rec["logits"][walk.step].clone()[None], walk.config)[0]
    return forbidden, forbidden.double().softmax(-1)


def output_stages(walk: WalkContext, piece) -> None:
    t, step = walk.t, walk.step
    logits = walk.rec["logits"][step]
    _, probs = step_logits(walk)
    top = probs.topk(TOP_CANDIDATES)
    top_pieces = [piece(i) for i in top.indices.tolist()]
    chosen_id, chosen = t.tgt_ids[step], t.tgt_tokens[step]
    rank = int((probs > probs[chosen_id]).sum()) + 1
    tied = walk.config.tie_output
    walk.add("output.projection", "output", "output", "output.projection", "output",
             [Numbers("logits", "largest logits", "row", logits[top.indices].numpy(), cols=top_pieces,
                      axes=("", "piece")),
              Numbers("chosen_logit", f"logit of “{chosen}”", "scalar", float(logits[chosen_id])),
              Numbers("vocabulary", "pieces scored", "scalar", int(logits.numel()))], ("logit", "tied embeddings"),
             vocab=int(logits.numel()), tied_formula=phrase("tied_formula") if tied else "",
             tied=phrase("output.tied" if tied else "output.untied"))
    walk.add("output.softmax", "output", "output", "output.softmax", "softmax",
             [Numbers("probabilities", "p", "row", top.values.numpy(), cols=top_pieces, axes=("", "piece")),
              Numbers("chosen_probability", f"p(“{chosen}”)", "scalar", float(probs[chosen_id])),
              Numbers("rank", "its rank", "scalar", rank)],
             ("softmax", "probability", "temperature", "top-k", "top-p"), piece=chosen, rank=rank, step=shown(step),
             vocab=int(logits.numel()))
    choice_stage(walk, top_pieces[0])


def choice_stage(walk: WalkContext, greedy_piece: str) -> None:
    t, step = walk.t, walk.step
    decoded = t.steps[step]
    strategy = t.strategy
    settings = {k: v for k, v in t.settings.items() if k not in ("max_length", "prefix")}
    how, formula = STRATEGY_TEXT.get(strategy, (phrase("strategy.other", strategy=strategy), "next = pick(p)"))
    how = how.format(**{"beam_size": "", "temperature": 1.0, "top_k": 0, "top_p": 1.0, **settings})
    following = t.tgt_tokens[step]
    ends = following == "</s>"
    fed_back = walk.inputs[: step + 1] + ([] if ends else [following])
    # the next step (numbered from 1) reads every decoder input fed back so far: as many as its number
    fed = phrase("fed.end") if ends else phrase("fed.next", piece=following, step=len(fed_back))
    walk.add("output.choice", "output", "output", "output.choice", "choose",
             [Numbers("strategy", "strategy", "tokens", [strategy], cols=["strategy"]),
              Numbers("settings", "settings", "tokens", [settings.get(k) for k in settings], cols=list(settings)),
              Numbers("decoded", "candidates as decoding saw them", "row", np.array([p for _, p in decoded.topk]),
                      cols=[tok for tok, _ in decoded.topk], axes=("", "piece")),
              Numbers("chosen", "chosen piece", "tokens", [following], cols=["piece"]),
              Numbers("fed_back", "next decoder inputs", "tokens", fed_back,
                      cols=[str(shown(i)) for i in range(len(fed_back))])],
             ("greedy", "beam", "length penalty", "sampling", "temperature"), how=how, top=greedy_piece,
             greedy_would=phrase("greedy.other" if strategy != "greedy" else "greedy.same"), strategy=strategy,
             chosen=following, fed=fed, formula=formula)
