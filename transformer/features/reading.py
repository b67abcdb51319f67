"""A dictionary read on one sentence, and one latent described from its catalogue: what the Features tab, the JSON
API and `python -m transformer.features top` show, from the same functions.

    read = sentence_latents(translator, saved, src_ids, tgt_ids)   # each token's strongest latents at the point
    read.strongest(12)                                              # the sentence's strongest latents
    describe(translator, saved, catalogue, 412)                      # label, contexts, histogram, promoted pieces
    piece_latents(translator, catalogue, "dog")                     # the latents whose kept contexts are on ▁dog

A decoder point is read teacher-forced on the translation: row i is the position that predicted its piece i, so a
decoder point's token is the piece predicted there (gather.py's convention).

Shapes: T tokens at the point, top latents kept per token.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.probes import SOURCE, TARGET
from .catalogue import Catalogue
from .contexts import promoted_pieces
from .dictionary import DictionaryError, checked_setting
from .files import SavedDictionary
from .gather import batch_vectors, point_path, side_of

MAX_CONTEXTS = 1000  # a latent's contexts described at most (fewer where its catalogue keeps fewer)

@dataclass
class SentenceLatents:
    point: str
    side: str  # SOURCE or TARGET: whose tokens
    tokens: list[str]  # the pieces at the point's positions
    z: torch.Tensor  # (T, n) the dictionary's latents at each position

    def top_of(self, position: int, top: int = 3) -> list[tuple[int, float]]:
        """Position's `top` strongest active latents: (latent, value), strongest first (ties: lower latent)."""
        row = self.z[position]
        order = sorted((j for j in torch.nonzero(row > 0).flatten().tolist()), key=lambda j: (-float(row[j]), j))
        return [(j, float(row[j])) for j in order[:top]]

    def strongest(self, count: int = 12, skip: tuple[str, ...] = ("</s>",)) -> list[tuple[int, float, int]]:
        """The latents with the highest value anywhere in the sentence but on the `skip` pieces (</s>, where many
        latents are strongest and say least): (latent, value, its position), strongest first (ties: lower latent)."""
        kept = torch.tensor([token not in skip for token in self.tokens])
        values, positions = torch.where(kept[:, None], self.z, torch.zeros(())).max(0)
        order = sorted(torch.nonzero(values > 0).flatten().tolist(), key=lambda j: (-float(values[j]), j))
        return [(j, float(values[j]), int(positions[j])) for j in order[:count]]


@torch.no_grad()
def sentence_latents(translator, saved: SavedDictionary, src_ids: list[int],
                     tgt_ids: list[int] | None = None) -> SentenceLatents:
    """The dictionary's latents over one sentence: the source's pieces (`src_ids`, </s> last) for an encoder point;
    for a decoder point, teacher-forced on `tgt_ids` (the translation's pieces, </s> last when it was produced)."""
    model = translator.model
    path = point_path(model, saved.origin.point)
    side = side_of(path)
    if side != SOURCE and not tgt_ids:
        raise DictionaryError(f"point {path!r} is the decoder's: give the translation's pieces (tgt_ids)")
    room = model.config.max_len
    src_ids, tgt_ids = list(src_ids)[:room], (list(tgt_ids)[:room] if side != SOURCE else None)
    vectors = batch_vectors(model, path, [src_ids], None if side == SOURCE else [tgt_ids])[0]
    ids = src_ids if side == SOURCE else tgt_ids
    tokens = [translator.tokenizer.id_to_piece(int(i)) for i in ids]
    return SentenceLatents(path, side, tokens, saved.dictionary.encode(vectors).float())


def context_pieces(translator, catalogue: Catalogue, sentence: int, position: int) -> dict:
    """One context as pieces: the sentence's pieces on the point's side with `marked` the row's index; for a decoder
    point, its source too and the target cut after the marked piece (what the decoder had seen, and what it
    predicted)."""
    tokenizer = translator.tokenizer
    if catalogue.side == SOURCE:
        ids = translator.source_ids(catalogue.sources[sentence])[0]
        return {"pieces": [tokenizer.id_to_piece(int(i)) for i in ids], "marked": position}
    ids = tokenizer.encode_target_batch([catalogue.targets[sentence]])[0] + [tokenizer.eos_id]
    return {"source": catalogue.sources[sentence], "pieces": [tokenizer.id_to_piece(int(i)) for i in
                                                             ids[: position + 1]], "marked": position}


def describe(translator, saved: SavedDictionary, catalogue: Catalogue, latent: int, contexts: int = 8) -> dict:
    """One latent as JSON: its label, how often it fires over the catalogue's corpus, its strongest contexts, its
    histogram and, for a decoder point, the output pieces its direction promotes."""
    latent = checked_setting("latent", latent, int, 0, saved.dictionary.config.n - 1)
    contexts = checked_setting("contexts", contexts, int, 1, MAX_CONTEXTS)
    piece = translator.tokenizer.id_to_piece
    edges, counts = catalogue.histogram_of(latent)
    found = [{"activation": round(c.activation, 4), **context_pieces(translator, catalogue, c.sentence, c.position)}
             for c in catalogue.contexts(latent)[:contexts]]
    answer = {"latent": latent, "point": saved.origin.point, "label": catalogue.label(latent, piece),
              "active": int(catalogue.active[latent]), "tokens": catalogue.tokens, "corpus": catalogue.corpus,
              "contexts": found, "histogram": {"edges": [round(float(e), 4) for e in edges],
                                               "counts": [int(c) for c in counts]}}
    if catalogue.side != SOURCE:
        answer["promoted"] = [[p, round(v, 4)] for p, v in promoted_pieces(translator, saved.dictionary, latent)]
    return answer


def piece_latents(translator, catalogue: Catalogue, piece: str, top: int = 8) -> list[tuple[int, float]]:
    """The latents whose kept contexts are on `piece` (as given, or with its word mark: "dog" finds "▁dog"), by their
    strongest activation on it: (latent, activation), strongest first. An encoder point reads the source language's
    pieces and a decoder point the target's: a piece the vocabulary lacks, or one on none of the catalogue's kept
    contexts (a German word at an English encoder point), is a DictionaryError naming the side and the point,
    rather than no latents."""
    top = checked_setting("top", top, int, 1, MAX_CONTEXTS)
    tokenizer, side = translator.tokenizer, side_named(translator, catalogue.side)
    forms = [form for form in dict.fromkeys((piece, "▁" + piece.lstrip("▁")))
             if tokenizer.piece_to_id(form) != tokenizer.unk_id]
    if not forms:
        encode = tokenizer.encode if catalogue.side == SOURCE else tokenizer.encode_target
        cut = " ".join(tokenizer.id_to_piece(int(i)) for i in encode(piece))
        raise DictionaryError(f"piece {piece!r} is not a piece of the {side} side that {catalogue.point} reads; the "
                              f"tokenizer cuts it into {cut}: give one of those")
    strongest = {}  # latent -> its strongest activation on either form
    for form in forms:
        for latent, activation in catalogue.latents_of_piece(tokenizer.piece_to_id(form), top):
            strongest[latent] = max(activation, strongest.get(latent, 0.0))
    found = sorted(strongest.items(), key=lambda hit: (-hit[1], hit[0]))
    if not found:
        other = side_named(translator, TARGET if catalogue.side == SOURCE else SOURCE)
        reader = "a decoder" if catalogue.side == SOURCE else "an encoder"
        raise DictionaryError(
            f"piece {piece!r} ({' or '.join(forms)}) is on none of the contexts the catalogue keeps for "
            f"{catalogue.point}, which reads the {side} side ({catalogue.tokens:,} tokens of {catalogue.corpus}); "
            f"a piece of the {other} side is read at {reader} point")
    return found[:top]


def side_named(translator, side: str) -> str:
    """"source (en)", "target (de)": a side and its language, where the model names its languages."""
    code = translator.languages.get("src" if side == SOURCE else "tgt")
    return f"{side} ({code})" if code else side


def marked_text(context: dict, mark: tuple[str, str] = ("[", "]")) -> str:
    """A context's pieces as text, the marked piece inside `mark` (word marks become spaces)."""
    words = [p.replace("▁", " ") for p in context["pieces"]]
    marked = words[context["marked"]]
    space = " " if marked.startswith(" ") else ""
    words[context["marked"]] = space + mark[0] + marked[len(space):] + mark[1]
    return "".join(words).strip()
