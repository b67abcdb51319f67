"""One teacher-forced pass recorded for the walk-through, and what every stage builder shares: the recordings, the
chosen piece, step, layer and head, the facts about the model its texts state (read from the checkpoint's config),
and `add`, which puts a stage's words (text.py) beside its numbers.

Indices are 0-based here: `token` is a source position, `step` the decoding step (0: the first output piece, predicted
from <s>), `layer` a layer of either stack, `head` a head of every attention kind. Texts number them from 1 through
core/head_ref.py.
"""
from __future__ import annotations

import numpy as np
import torch

from ...core.capture import record
from ...core.head_mask import heads_masked
from ...core.head_ref import head_label, layer_label, shown
from ...core.model import Transformer
from ...core.probes import pattern
from .family_text import variant
from .stage import Numbers, Stage
from .text import MODULES, stage_ask, stage_text


class PassRecording:
    """Every point of one teacher-forced pass, read by name (core/probes.py) with the batch axis removed: a name with
    a point in every layer (`cross.scores`, `encoder_hidden`) as (L, ...), a point of the whole model (`logits`)
    as (...)."""

    def __init__(self, recording):
        self.recording = recording
        self.read: dict[str, torch.Tensor] = {}

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.read:
            stacked = self.recording[name][:, 0].float().cpu()
            self.read[name] = stacked if "*" in pattern(name) else stacked[0]
        return self.read[name]


def record_pass(model: Transformer, src_ids: list[int], tgt_ids: list[int], heads_off=None) -> PassRecording:
    """One teacher-forced pass with every point recorded. The decoder's inputs are its start token (<s>) then
    tgt_ids[:-1], as decoding fed them."""
    src = torch.tensor([src_ids], device=model.device)
    tgt = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:-1])], device=model.device)
    with torch.no_grad(), heads_masked(model, heads_off), record(model, ["**"]) as recording:
        model(src, tgt)
    return PassRecording(recording)


def vector(name: str, label: str, values: torch.Tensor, note: str = "") -> Numbers:
    return Numbers(name, label, "vector", values.numpy(), note=note, axes=("", "feature"))


def norm_of(values: torch.Tensor) -> float:
    return float(values.double().norm())


def is_byte_piece(piece: str) -> bool:
    """SentencePiece's byte fallback: "<0xCE>" spells one UTF-8 byte of a character the vocabulary lacks."""
    return len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">")


def masked_as_inf(masked: torch.Tensor) -> np.ndarray:
    """Masked scores with the dtype's lowest value (what masked_fill wrote) as -inf, which is what it stands for."""
    out = masked.numpy().astype(np.float64)
    out[masked.numpy() <= np.finfo(np.float32).min] = -np.inf
    return out


def model_facts(config, side: str = "encoder") -> dict:
    """What the texts say about the model, from its config: the widths of `side`'s stack."""
    stack = config.stack_of(side)
    return {"d_model": config.d_model, "d_ff": stack.d_ff, "n_heads": stack.heads, "n_layers": stack.layers,
            "d_k": stack.head_dim, "vocab": config.tgt_vocab_size}


def side_of(block: str) -> str:
    """The stack a block of the page (explorer/views/walkthrough_payload.BLOCKS) or an attention kind belongs to: the
    encoder's (the pieces and the encoder's input too), or the decoder's (cross-attention and the output too)."""
    return "encoder" if block.startswith("encoder") or block in ("text", "input") else "decoder"


class WalkContext:
    """The recordings (`rec`) of one pass and the stages built from them, for one layer and one head. The layer and
    head are chosen over the widest stack; where a stack has fewer, its stages show its last layer and last head
    (`layer_of`, `head_of`), and their titles name the one shown."""

    def __init__(self, model, translation, rec, token, step, layer, head, start_piece: str):
        self.model, self.t, self.rec, self.config = model, translation, rec, model.config
        self.token, self.step, self.layer, self.head = token, step, layer, head
        self.pre = self.config.norm == "pre"
        self.src = list(translation.src_tokens)
        self.inputs = [start_piece] + list(translation.tgt_tokens[:-1])  # what decoding fed the decoder
        self.decoder_keys = self.inputs[: step + 1]  # what the step's masked self-attention reads: <s>, then its past
        self.stages: list[Stage] = []

    def layer_of(self, side: str) -> int:
        return min(self.layer, self.config.stack_of(side).layers - 1)

    def head_of(self, side: str) -> int:
        return min(self.head, self.config.stack_of(side).heads - 1)

    def head_size(self, side: str) -> int:
        return self.config.stack_of(side).head_dim

    def where(self, side: str) -> str:
        """The layer a stage of `side`'s stack shows, as its title names it: "Encoder layer 3", with "(its last)"
        where the chosen layer is beyond this stack."""
        last = " (its last)" if self.layer_of(side) != self.layer else ""
        return f"{side.capitalize()} {layer_label(self.layer_of(side))}{last}"

    def head_name(self, side: str) -> str:
        return head_label(self.head_of(side))

    def position_number(self, position: int) -> int:
        """A 0-based position as the page and the API count it."""
        return shown(position)

    def add(self, key: str, block: str, group: str, text: str, module: str, numbers: list[Numbers],
            terms: tuple[str, ...], **facts) -> None:
        facts = {**model_facts(self.config, side_of(block)), **facts}
        text = variant(text, self.config, key)
        words = stage_text(text, **facts)
        self.stages.append(Stage(key=key, block=block, group=group, title=words.title, text=words.text,
                                 why=words.why, formula=words.formula, module=MODULES[module], numbers=numbers,
                                 terms=terms, ask=stage_ask(text, **facts)))
