"""Steering a translation by a dictionary's latents, and which latents cause a target piece.

    with steering(model, saved, [Edit(latent=412, scale=0.0)]):      # latent 412 taken out of its point
        translator.translate("A dog runs.")                            # decoding honours it, as any patch

An edit changes the point's vector x by (scale - 1) · z_j · W_dec[j] at its positions, where z = encode(x): scale 0
removes latent j's part of x, 2 doubles it. Everything else of x stays, the reconstruction error included, so an edit
that changes nothing (scale 1) leaves the model's numbers exactly as they were. It goes through `patch()`, the one
mechanism recording and patching share, so the fused decoding step steps aside as for any patch.

`causes` ranks the latents active in one sentence by how much removing each one lowers a target piece's
log-probability, teacher-forced: estimated for all of them by gradient × activation (attribution patching: the
first-order change, -∂log p/∂x · z_j W_dec[j], summed over positions), and exact, one forward pass each, for the
`exact` best estimated.

Shapes: B batch, T positions at the point, D its width, n latents.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..choices import type_phrase
from ..core.patching import patch
from ..core.probes import SOURCE
from ..corpus.data import pad
from ..decoding.translator import Translator
from .dictionary import DictionaryError, SparseDictionary, checked_setting
from .files import SavedDictionary
from .gather import point_path, side_of

MAX_SCALE = 100.0  # |scale| above this only breaks the translation; refused rather than guessed at


@dataclass(frozen=True)
class Edit:
    latent: int  # 0-based
    scale: float = 0.0  # the latent's new multiple of its own part: 0 removes it, 1 keeps it, 2 doubles it
    positions: tuple[int, ...] | None = None  # 0-based positions at the point; None: every position


def checked_edits(dictionary: SparseDictionary, edits) -> tuple[Edit, ...]:
    """`edits` (Edit objects) checked against the dictionary: each latent in [0, n), a finite scale within
    ±MAX_SCALE, positions non-negative integers. A bad one is a DictionaryError naming it."""
    if not isinstance(edits, (list, tuple)) or not all(isinstance(edit, Edit) for edit in edits):
        raise DictionaryError(f"edits must be a list of Edit, got {type_phrase(edits)}")
    n = dictionary.config.n
    for edit in edits:
        checked_setting("latent", edit.latent, int, 0, n - 1)
        checked_setting("scale", edit.scale, float, -MAX_SCALE, MAX_SCALE)
        for position in edit.positions or ():
            checked_setting("positions", position, int, 0)
    return tuple(edits)


def edited(dictionary: SparseDictionary, edits: tuple[Edit, ...]):
    """The function `patch` applies at the point: x -> x + Σ (scale - 1) · z_j · W_dec[j] over the edits."""

    def apply(x: torch.Tensor) -> torch.Tensor:  # (B, T, D)
        z = dictionary.encode(x)  # (B, T, n)
        change = torch.zeros_like(x, dtype=dictionary.W_dec.dtype)
        for edit in edits:
            part = z[..., edit.latent, None] * dictionary.W_dec[edit.latent]  # (B, T, D)
            if edit.positions is not None:
                keep = torch.zeros(x.shape[-2], dtype=part.dtype, device=part.device)
                keep[[p for p in edit.positions if p < x.shape[-2]]] = 1.0
                part = part * keep[:, None]
            change = change + (edit.scale - 1.0) * part
        return x + change.to(x.dtype)

    return apply


@contextlib.contextmanager
def steering(model, saved: SavedDictionary, edits):
    """While open, the model's passes see `saved`'s point edited by `edits`."""
    edits = checked_edits(saved.dictionary, edits)
    path = point_path(model, saved.origin.point)
    with patch(model, {path: edited(saved.dictionary, edits)}):
        yield


@dataclass
class Steered:
    before: str  # the translation without the edits
    after: str  # with them
    edits: tuple[Edit, ...]


def steer(translator: Translator, saved: SavedDictionary, text: str, edits, **decoding) -> Steered:
    """`text` translated as it is and with `edits` applied (the same decoding settings for both)."""
    edits = checked_edits(saved.dictionary, edits)
    before = translator.translate(text, **decoding).text
    with steering(translator.model, saved, edits):
        after = translator.translate(text, **decoding).text
    return Steered(before, after, edits)


@dataclass
class Cause:
    latent: int
    estimate: float  # attribution patching's first-order drop of the piece's log-probability
    exact: float | None  # the drop measured with the latent removed (None: not measured, outside the `exact` best)
    activation: float  # the latent's largest value over the positions that reach the piece


def teacher_forced(translator: Translator, source: str, target: str) -> tuple[torch.Tensor, torch.Tensor, list]:
    """(src (1, S), decoder input (1, T), target ids (T,)): the decoder reads the start token, then the target."""
    model = translator.model
    source_ids = translator.source_ids(source)[0]
    target_ids = translator.tokenizer.encode_target_batch([target])[0][: model.config.max_len - 1]
    target_ids = target_ids + [translator.tokenizer.eos_id]
    src = pad([source_ids], model.config.pad_id).to(model.device)
    tgt = pad([[model.config.decoder_start_id] + target_ids[:-1]], model.config.pad_id).to(model.device)
    return src, tgt, target_ids


def piece_log_prob(model, src, tgt, piece: int, target_id: int) -> torch.Tensor:
    return model(src, tgt)[0, piece].float().log_softmax(-1)[target_id]


def causes(translator: Translator, saved: SavedDictionary, source: str, target: str, piece: int,
           exact: int = 10) -> list[Cause]:
    """The latents active at `saved`'s point in the teacher-forced pass over (source, target) that reach `target`'s
    piece `piece` (0-based, `</s>` last), ranked by how much their removal lowers that piece's log-probability:
    measured for the `exact` best estimated, then the rest by estimate."""
    model, dictionary = translator.model, saved.dictionary
    path = point_path(model, saved.origin.point)
    src, tgt, target_ids = teacher_forced(translator, source, target)
    piece = checked_setting("piece", piece, int, 0, len(target_ids) - 1)
    exact = checked_setting("exact", exact, int, 0)
    reach = src.shape[1] if side_of(path) == SOURCE else piece + 1  # the decoder sees no later position
    captured = {}

    def opened(x):  # the point's vectors, made a leaf whose gradient is ∂log p/∂x
        captured["x"] = x.detach().requires_grad_(True)
        return captured["x"]

    with torch.enable_grad(), patch(model, {path: opened}):
        base = piece_log_prob(model, src, tgt, piece, target_ids[piece])
        # the gradient at the point only: nothing is left on the model's parameters (.grad stays None)
        gradient = torch.autograd.grad(base, captured["x"])[0][0, :reach]  # (T, D)
    x, base = captured["x"].detach()[0, :reach], base.detach()
    with torch.no_grad():
        z = dictionary.encode(x)  # (T, n)
        active = torch.nonzero(z.amax(0) > 0).flatten().tolist()
        # removing latent j moves x by -z_j W_dec[j] at each position: first-order change gradient · that
        estimates = {j: float((gradient @ dictionary.W_dec[j]) @ z[:, j]) for j in active}
        ranked = sorted(active, key=lambda j: (-estimates[j], j))
        found = []
        for rank, j in enumerate(ranked):
            measured = None
            if rank < exact:
                with steering(model, saved, [Edit(j, 0.0, tuple(range(reach)))]):
                    measured = float(base - piece_log_prob(model, src, tgt, piece, target_ids[piece]))
            found.append(Cause(j, estimates[j], measured, float(z[:, j].max())))
    measured = sorted((c for c in found if c.exact is not None), key=lambda c: (-c.exact, c.latent))
    return measured + [c for c in found if c.exact is None]



def explanation(translator: Translator, saved: SavedDictionary, source: str, target: str | None, piece: int,
                exact: int = 10) -> dict:
    """`causes` as the command line and the JSON API answer it: `piece` counted from 1 (`</s>` last) and checked
    against the target (None: the model's greedy translation), the causes listed (at least 10)."""
    target = translator.translate(source, strategy="greedy").text if target is None else target
    room = translator.model.config.max_len - 1
    pieces = len(translator.tokenizer.encode_target_batch([target])[0][:room]) + 1  # with its </s>
    if isinstance(piece, bool) or not isinstance(piece, int) or not 1 <= piece <= pieces:
        raise DictionaryError(f"piece must be in [1, {pieces}] (the pieces of {target!r}, </s> last), got {piece!r}")
    found = causes(translator, saved, source, target, piece - 1, exact)
    return {"target": target, "point": saved.origin.point, "piece": piece, "pieces": pieces,
            "numbering": "latents from 0; pieces from 1, </s> last",
            "causes": [{"latent": c.latent, "exact": c.exact, "estimate": round(c.estimate, 6),
                        "activation": round(c.activation, 6)} for c in found[: max(exact, 10)]]}
