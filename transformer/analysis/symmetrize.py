"""Two one-directional word alignments combined into one (Och & Ney, 2003; Koehn et al., 2003).

A statistical aligner such as eflomal or fast_align runs in both directions: the forward alignment links each
target word to at most one source word, the reverse one each source word to at most one target word. Both are
sets of (source word, target word) pairs, 0-based, as in analysis/alignment.py.

    intersection      links both directions agree on: precise, but every word gets at most one link
    grow-diag-final   the intersection, grown towards the union through neighbouring links (diagonals
                      included) that touch a word still unaligned, then any remaining link of either direction
                      whose source or target word is still unaligned (the Moses default before "-and")
"""
from __future__ import annotations

from collections.abc import Callable

from .alignment import Alignment

# the 8 neighbours of a link, in the order Moses' grow-diag checks them
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersection(forward: Alignment, reverse: Alignment) -> Alignment:
    return set(forward) & set(reverse)


def grow_diag_final(forward: Alignment, reverse: Alignment) -> Alignment:
    union = set(forward) | set(reverse)
    links = intersection(forward, reverse)
    aligned_source = {i for i, _ in links}
    aligned_target = {j for _, j in links}

    def add(link: tuple[int, int]) -> None:
        links.add(link)
        aligned_source.add(link[0])
        aligned_target.add(link[1])

    grown = True
    while grown:
        grown = False
        for link in sorted(union):  # every candidate in order; links only ever come from the union
            if link not in links:
                continue
            for di, dj in NEIGHBOURS:
                neighbour = (link[0] + di, link[1] + dj)
                if neighbour in union and neighbour not in links and (
                        neighbour[0] not in aligned_source or neighbour[1] not in aligned_target):
                    add(neighbour)
                    grown = True
    for direction in (forward, reverse):
        for link in sorted(direction):
            if link not in links and (link[0] not in aligned_source or link[1] not in aligned_target):
                add(link)
    return links


SYMMETRIZATIONS: dict[str, Callable[[Alignment, Alignment], Alignment]] = {
    "grow-diag-final": grow_diag_final,
    "intersection": intersection,
}

__all__ = ["SYMMETRIZATIONS", "grow_diag_final", "intersection"]
