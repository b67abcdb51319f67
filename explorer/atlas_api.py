"""The corpus atlas on the API: /atlas_neighbours (the corpus tokens nearest to a token of a sentence) and /atlas_map
(one head's map, with the sentence's own queries and keys placed on it). Layers, heads, tokens, sentences and
positions count from 1, as every endpoint does; a bad argument's message names it. Each attention kind has its own
stack's layers and heads, and each side its own stack's layers (the encoder's for encoder_self and the source, the
decoder's for decoder_self, cross and the target): the ranges are checked per kind or side, and say whose.

Which atlas a model has, and how it is opened: atlas_service.py. The wiring registers these beside the other
endpoints (`atlas_endpoints`).
"""
from __future__ import annotations

from dataclasses import asdict

from transformer.atlas.extract import part_side
from transformer.atlas.query import head_points, neighbours, placed, similar_heads
from transformer.atlas.store import AtlasError
from transformer.core.head_ref import from_shown, shown
from transformer.core.probes import ATTENTION_KINDS, SOURCE, TARGET
from transformer.numbers import NumberError

from .api import api_choice, counted
from .atlas_service import MAX_K, one_sentence, sentence_vectors, served_atlas
from .text import page_error


def atlas_neighbours_endpoint(ui):
    def atlas_neighbours(text: str, token: int = 1, layer: int = 1, side: str = SOURCE, k: int = 10,
                         model: str = None) -> dict:
        """The k corpus tokens (k in [1, 100]) whose residual vector after `layer` is nearest to that of token
        `token` of `text` (side "source") or of its greedy translation (side "target"), with their sentence pairs;
        layer, token, sentences and positions counted from 1, distances Euclidean."""
        api_choice("side", side, (SOURCE, TARGET))
        counted("token", token), counted("layer", layer), counted("k", k, MAX_K)
        text = one_sentence(text)
        served, atlas = served_atlas(ui, model)
        layer = counted("layer", layer, atlas.stack(side).layers, atlas.stack_text(side))
        vectors = sentence_vectors(served, text)
        token = counted("token", token, len(vectors.pieces[side]), f" for the {side} side of this sentence")
        k = counted("k", k, min(MAX_K, atlas.tokens[side]))
        try:
            found = neighbours(atlas, vectors, from_shown(token), from_shown(layer), side, k)
        except (AtlasError, NumberError) as error:
            raise page_error(str(error)) from None
        return {"sentence": text, "translation": vectors.translation, "side": side, "layer": layer, "token": token,
                "piece": vectors.pieces[side][from_shown(token)], "pieces": vectors.pieces,
                "neighbours": [{**asdict(n), "sentence": shown(n.sentence), "position": shown(n.position),
                                "distance": round(n.distance, 6)} for n in found]}

    return atlas_neighbours


def points_json(points: dict) -> dict:
    return {"side": points["side"], "x": points["coordinates"][:, 0].round(4).tolist(),
            "y": points["coordinates"][:, 1].round(4).tolist(), "piece": points["piece"],
            "sentence": [shown(s) for s in points["sentence"]], "position": [shown(p) for p in points["position"]]}


def atlas_map_endpoint(ui):
    def atlas_map(kind: str = "cross", layer: int = 1, head: int = 1, text: str = None, model: str = None) -> dict:
        """One head's map (layer and head from 1): its sampled corpus queries and keys as x, y with their pieces,
        sentences and positions (from 1); with `text`, that sentence's own queries and keys placed on the map
        (source side for encoder queries and all keys of encoder and cross attention, its translation otherwise); and
        the other heads of the kind ranked by how alike their maps are (`similar_heads`, share of shared neighbours)."""
        api_choice("kind", kind, ATTENTION_KINDS)
        counted("layer", layer), counted("head", head)
        text = None if text is None else one_sentence(text)
        served, atlas = served_atlas(ui, model)
        shape, of = atlas.stack(kind), atlas.stack_text(kind)  # the kind's own stack
        layer, head = counted("layer", layer, shape.layers, of), counted("head", head, shape.heads, of)
        try:
            points = head_points(atlas, kind, from_shown(layer), from_shown(head))
        except AtlasError as error:
            raise page_error(str(error)) from None
        alike = similar_heads(atlas, kind, from_shown(layer), from_shown(head))
        answer = {"kind": kind, "layer": layer, "head": head, "projection": points["projection"],
                  "queries": points_json(points["queries"]), "keys": points_json(points["keys"]),
                  "similar_heads": [{"layer": shown(other_layer), "head": shown(other_head), "overlap": round(share, 4)}
                                    for other_layer, other_head, share in alike]}
        if text is not None:
            vectors = sentence_vectors(served, text)
            where = placed(atlas, vectors, kind, from_shown(layer), from_shown(head))
            answer["placed"] = {part: {"side": part_side(kind, part), "x": xy[:, 0].round(4).tolist(),
                                       "y": xy[:, 1].round(4).tolist(),
                                       "piece": vectors.pieces[part_side(kind, part)]} for part, xy in where.items()}
            answer["translation"] = vectors.translation
        return answer

    return atlas_map


def atlas_endpoints(ui) -> dict:
    """The atlas's endpoints by API name, for `api.wire_api`."""
    return {"atlas_neighbours": atlas_neighbours_endpoint(ui), "atlas_map": atlas_map_endpoint(ui)}
