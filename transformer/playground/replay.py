"""A run's history as one small JSON file: the curve, and at each snapshot the probe's prediction and its attention
(every layer and head, the three kinds), so a page can replay how each head formed without training anything.

Attention is stored as bytes, each weight rounded to the nearest 1/255 (a weight is in [0, 1]; 1/510 is finer than
any colour scale draws): a default run's replay is a few tens of KB.
"""
from __future__ import annotations

import base64
import json
import platform
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..core.probes import ATTENTION_KINDS
from ..json_files import read_json

FORMAT = 1
REPLAY_FILE = "replay.json"
LEVELS = 255  # a weight w is stored as round(w * LEVELS), one byte


class ReplayError(ValueError):
    """A replay file that cannot be read; the message names it."""


def pack(weights: np.ndarray) -> dict:
    levels = np.clip(np.rint(np.asarray(weights, dtype=np.float64) * LEVELS), 0, LEVELS).astype(np.uint8)
    return {"shape": list(levels.shape), "bytes": base64.b64encode(levels.tobytes()).decode("ascii")}


def unpack(packed: dict) -> np.ndarray:
    levels = np.frombuffer(base64.b64decode(packed["bytes"]), dtype=np.uint8)
    return (levels.reshape(packed["shape"]).astype(np.float32)) / LEVELS


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass
class Replay:
    settings: dict  # Settings.to_dict()
    pattern: str  # the task's expected attention, in words
    source: list[str]  # the probe's pieces
    target: list[str]
    losses: list[float]  # every update's training loss
    snapshots: list[dict]  # {"step", "loss", "accuracy", "prediction", "seconds", "attention": kind -> packed}
    stopped_by: str | None
    parameters: int
    machine: dict  # where it ran: the CPU, torch's version and threads (a curve is reproducible on the same CPU)

    @classmethod
    def from_run(cls, run) -> "Replay":
        snapshots = [{"step": s.step, "loss": round(s.loss, 5), "accuracy": round(s.accuracy, 4),
                      "prediction": s.prediction, "seconds": round(s.seconds, 3),
                      "attention": {kind: pack(s.attention[kind]) for kind in ATTENTION_KINDS}}
                     for s in run.history]
        source, target = run.task.probe
        return cls(run.settings.to_dict(), run.task.pattern, list(source), list(target),
                   [round(loss, 5) for loss in run.losses], snapshots, run.stopped_by, run.model.num_parameters(),
                   {"cpu": cpu_name(), "torch": torch.__version__, "threads": torch.get_num_threads()})

    @property
    def steps(self) -> list[int]:
        return [s["step"] for s in self.snapshots]

    def at(self, index: int) -> dict:
        """The snapshot at `index` (0-based, clamped) with its attention unpacked: kind -> (L, H, rows, cols)."""
        snapshot = self.snapshots[min(max(int(index), 0), len(self.snapshots) - 1)]
        return {**snapshot, "attention": {k: unpack(v) for k, v in snapshot["attention"].items()}}

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(rows, columns) of a kind's maps: the decoder's rows are the pieces it predicts, the encoder's and the
        keys the pieces it reads."""
        source = self.source + ["</s>"]
        predicted, read = self.target + ["</s>"], ["<s>"] + self.target
        return {"encoder_self": (source, source), "decoder_self": (predicted, read),
                "cross": (predicted, source)}[kind]

    def to_dict(self) -> dict:
        return {"format": FORMAT, **self.__dict__}

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n",
                        encoding="utf-8")
        return path

    @classmethod
    def load(cls, path) -> "Replay":
        values = read_json(path, ReplayError)
        if values.pop("format", None) != FORMAT:
            raise ReplayError(f"{path}: not a replay of format {FORMAT}")
        try:
            return cls(**values)
        except TypeError as error:
            raise ReplayError(f"{path}: {error}") from None
