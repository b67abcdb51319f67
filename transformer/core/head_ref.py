"""One head address, `HeadRef(kind, layer, head)`, numbered from 0 inside the code.

People read and type layers and heads numbered from 1 ("cross 3 2", "layer 3", "head 2"), and the JSON reports
beside a checkpoint store them so. That form is made and parsed here and nowhere else: code converts with
`shown` / `from_shown` or the methods below, never with a bare + 1 or - 1.
"""
from __future__ import annotations

from typing import NamedTuple

from ..numbers import ascii_digits
from .probes import ATTENTION_KINDS


def shown(index: int) -> int:
    """The number people read for a 0-based layer, head, decoding step or token index."""
    return index + 1


def from_shown(number: int) -> int:
    """The 0-based index of a layer, head, decoding step or token numbered from 1."""
    return number - 1


def layer_label(layer: int) -> str:
    return f"layer {shown(layer)}"


def head_label(head: int) -> str:
    return f"head {shown(head)}"


class HeadRef(NamedTuple):
    """A head of one attention kind; a plain (kind, layer, head) tuple compares equal to it."""

    kind: str
    layer: int
    head: int

    @property
    def entry(self) -> str:
        """The form heads_off text uses: "cross 3 2"."""
        return f"{self.kind} {shown(self.layer)} {shown(self.head)}"

    @property
    def label(self) -> str:
        """The form a table or a choice shows within one kind: "layer 3 head 2"."""
        return f"{layer_label(self.layer)} {head_label(self.head)}"

    def numbered(self) -> dict:
        """kind, layer and head numbered from 1, as the JSON reports beside a checkpoint store them."""
        return {"kind": self.kind, "layer": shown(self.layer), "head": shown(self.head)}

    @classmethod
    def from_numbered(cls, entry: dict) -> "HeadRef":
        """From a report's {kind, layer, head} numbered from 1."""
        return cls(entry["kind"], from_shown(entry["layer"]), from_shown(entry["head"]))

    @classmethod
    def parse(cls, text: str) -> "HeadRef":
        """From "kind layer head" numbered from 1 ("cross 3 2"); a malformed entry raises ValueError naming it."""
        parts = str(text).split()
        if len(parts) != 3 or parts[0] not in ATTENTION_KINDS or not all(map(ascii_digits, parts[1:])):
            raise ValueError(f"heads_off entry {str(text).strip()!r} must be 'kind layer head' with kind one of "
                             f"{list(ATTENTION_KINDS)} and layer and head numbered from 1, e.g. 'cross 3 2'")
        layer, head = int(parts[1]), int(parts[2])
        if layer < 1 or head < 1:
            raise ValueError(f"heads_off entry {str(text).strip()!r}: layers and heads are numbered from 1")
        return cls(parts[0], from_shown(layer), from_shown(head))
