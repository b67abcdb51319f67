"""Training a tiny Transformer on a toy task while its attention forms.

    run = PlaygroundRun(Settings.checked(task="reverse"))
    for snapshot in run.snapshots():      # every `redraw_every` updates, and before the first
        print(snapshot.step, snapshot.loss, snapshot.accuracy, snapshot.prediction)
    run.replay()                          # the whole history, for replaying; run.model is the trained model

Deterministic given the settings on one CPU: the weights start from `torch.manual_seed(seed)`, the examples come from
`random.Random(seed)`, and nothing draws randomness besides (no dropout). The caller chooses the threads (the CLI and
the app's worker process use one).

Shapes: B batch, S source pieces + </s>, T target pieces + 1 (<s> in, </s> out), L layers, H heads.
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from ..checkpoint import save_checkpoint
from ..core.capture import capture_attention
from ..core.model import Transformer, padding_mask
from ..core.probes import ATTENTION_KINDS
from ..symbol_tokenizer import SYMBOLS_FILE, SymbolTokenizer
from .replay import REPLAY_FILE, Replay
from .settings import LR_FLOOR, Settings
from .tasks import TASKS, Task


class RunError(RuntimeError):
    """A run that cannot go on (its loss became NaN); the message says when and what to change."""


@dataclass
class Snapshot:
    step: int  # updates done
    loss: float  # mean training loss of the updates since the last snapshot (the first: of the untrained model)
    accuracy: float  # exact-match share of the evaluation set, greedy
    prediction: list[str]  # the probe's greedy output now
    attention: dict[str, np.ndarray]  # kind -> (L, H, rows, cols), the probe teacher-forced
    seconds: float  # since the run started


def learning_rate(update: int, settings: Settings) -> float:
    """Adam's learning rate for `update` (1 to `settings.steps`): a linear rise over the first W = round(warmup_ratio
    x steps) updates to `learning_rate`, then (schedule "cosine") a half cosine down to LR_FLOOR x learning_rate at
    the last update, or (schedule "constant") the peak to the end.

    Warm-up because Adam's first updates divide by second-moment estimates made of a handful of gradients (Vaswani
    et al., 2017, 5.3; Liu et al., 2020, RAdam). Then cosine rather than the paper's 1/sqrt(step): a playground run's
    length is known, and its late updates, taken when the loss is near 0 and the gradients small, are where a
    constant rate made the loss jump (docs/playground.md, "The learning rate"); 1/sqrt would still be at 1/3 of
    the peak at the end of an 800-update run, cosine comes down to the floor exactly there (nanoGPT's get_lr, which
    also decays to a tenth; Hoffmann et al., 2022, decay to a tenth over the run's length)."""
    warmup, steps = round(settings.warmup_ratio * settings.steps), settings.steps
    if update <= warmup:
        return settings.learning_rate * update / warmup
    if settings.schedule == "constant":
        return settings.learning_rate
    progress = (update - warmup) / (steps - warmup)  # (0, 1]: 1 at the last update
    return settings.learning_rate * (LR_FLOOR + (1 - LR_FLOOR) * 0.5 * (1 + math.cos(math.pi * progress)))


def batch_ids(tokenizer: SymbolTokenizer, pairs, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """(source pieces, target pieces) pairs -> src (B, S) ending in </s>, tgt (B, T) = <s> target </s>, padded."""
    sources = [[tokenizer.piece_to_id(p) for p in s] + [tokenizer.eos_id] for s, _ in pairs]
    targets = [[tokenizer.bos_id] + [tokenizer.piece_to_id(p) for p in t] + [tokenizer.eos_id] for _, t in pairs]

    def padded(rows):
        width = max(len(r) for r in rows)
        return torch.tensor([r + [tokenizer.pad_id] * (width - len(r)) for r in rows], device=device)

    return padded(sources), padded(targets)


@torch.no_grad()
def greedy(model: Transformer, src: torch.Tensor, eos_id: int, bos_id: int, longest: int) -> list[list[int]]:
    """Each row's greedy output ids, without <s> and </s>; the source encoded once, the whole prefix re-run each step
    (tiny models: simpler than the cached step, and as fast)."""
    src_mask = padding_mask(src, model.config.pad_id)
    memory = model.encode(src, src_mask)
    out = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(longest):
        next_ids = model.decode(memory, src_mask, out)[:, -1].argmax(-1)
        out = torch.cat([out, next_ids.unsqueeze(1)], dim=1)
        done |= next_ids == eos_id
        if done.all():
            break
    rows = []
    for row in out[:, 1:].tolist():
        rows.append(row[: row.index(eos_id)] if eos_id in row else row)
    return rows


class PlaygroundRun:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.task = TASKS[settings.task]
        self.tokenizer = self.tokenizer_of(self.task)
        torch.manual_seed(settings.seed)
        self.model = Transformer(settings.model_config(self.tokenizer.vocab_size))
        self.examples = random.Random(settings.seed)
        evaluation = random.Random(f"held-out {settings.task}")  # the same set for every seed and model
        self.evaluation = (self.task.every_example() if self.task.every_example
                           else [self.task.sample(evaluation) for _ in range(settings.held_out)])
        self.losses: list[float] = []  # every update's
        self.history: list[Snapshot] = []
        self.stopped_by: str | None = None  # "time cap" when the cap ended it early

    @staticmethod
    def tokenizer_of(task: Task) -> SymbolTokenizer:
        return SymbolTokenizer(list(task.symbols), task.joiner)

    def probe_ids(self) -> tuple[torch.Tensor, torch.Tensor]:
        return batch_ids(self.tokenizer, [self.task.probe])

    def look(self, step: int, loss: float, started: float) -> Snapshot:
        """The model now: its accuracy, the probe's prediction and the probe's attention (teacher-forced)."""
        self.model.eval()
        src, tgt = self.probe_ids()
        with torch.no_grad(), capture_attention(self.model) as recorded:
            self.model(src, tgt[:, :-1])  # <s> and the target in; the target and </s> predicted
        attention = {kind: getattr(recorded, kind)[:, 0].numpy().copy() for kind in ATTENTION_KINDS}
        prediction = greedy(self.model, src, self.tokenizer.eos_id, self.tokenizer.bos_id, tgt.size(1))[0]
        snapshot = Snapshot(step, loss, self.accuracy(), [self.tokenizer.id_to_piece(i) for i in prediction],
                            attention, time.perf_counter() - started)
        self.model.train()
        self.history.append(snapshot)
        return snapshot

    def accuracy(self) -> float:
        src, tgt = batch_ids(self.tokenizer, self.evaluation)
        outputs = greedy(self.model, src, self.tokenizer.eos_id, self.tokenizer.bos_id, tgt.size(1))
        wanted = [[self.tokenizer.piece_to_id(p) for p in target] for _, target in self.evaluation]
        return sum(out == want for out, want in zip(outputs, wanted)) / len(wanted)

    def snapshots(self, between_steps: Callable[[], object] | None = None):
        """Trains, yielding a Snapshot before the first update, every `redraw_every` updates and at the end (the
        last step, or the time cap). `between_steps`, when given, is called before each update and each redraw: the
        app's worker process waits there while the server translates (explorer/training_queue.py). The time it
        takes counts towards the time cap."""
        settings, started = self.settings, time.perf_counter()
        optimizer = torch.optim.Adam(self.model.parameters(), lr=settings.learning_rate)
        src, tgt = self.probe_ids()
        with torch.no_grad():  # the untrained model's loss on the probe: where the curve starts
            first = F.cross_entropy(self.model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten()).item()
        yield self.look(0, first, started)
        self.model.train()
        since = []
        for step in range(1, settings.steps + 1):
            if between_steps is not None:
                between_steps()
            src, tgt = batch_ids(self.tokenizer, [self.task.sample(self.examples) for _ in range(settings.batch_size)])
            logits = self.model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=self.tokenizer.pad_id)
            if not torch.isfinite(loss):
                raise RunError(f"the loss became {loss.item()} at step {step}; lower learning_rate "
                               f"({settings.learning_rate})")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, settings)
            optimizer.step()
            self.losses.append(loss.item())
            since.append(self.losses[-1])
            capped = time.perf_counter() - started >= settings.time_cap
            if step % settings.redraw_every == 0 or step == settings.steps or capped:
                if between_steps is not None:  # a redraw scores the held-out set: as long as a few updates
                    between_steps()
                yield self.look(step, sum(since) / len(since), started)
                since = []
            if capped and step < settings.steps:
                self.stopped_by = "time cap"
                break
        self.model.eval()

    def train(self) -> Snapshot:
        """Runs to the end; the last snapshot."""
        for snapshot in self.snapshots():
            pass
        return snapshot

    def replay(self) -> Replay:
        return Replay.from_run(self)


# what save_run writes: a folder holding any of them holds a run (the command line replaces one only when told)
RUN_FILES = ("config.json", "model.safetensors", SYMBOLS_FILE, "metrics.json", REPLAY_FILE)


def save_run(run: PlaygroundRun, directory, dtype: torch.dtype = torch.float32) -> Path:
    """The trained model as a checkpoint folder every tool opens (config.json, model.safetensors, symbols.json,
    metrics.json), with its replay beside it as replay.json. `dtype`: the weights' (the shipped runs keep float16,
    half the bytes)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    symbols = run.tokenizer.save(directory / SYMBOLS_FILE)
    last = run.history[-1]
    extra = {"tokenizer": {"type": "symbols"}, "languages": {"src": run.task.name, "tgt": run.task.name},
             "playground": {"task": run.task.name, "pattern": run.task.pattern, "settings": run.settings.to_dict()}}
    metrics = {"decoding": {"strategy": "greedy"}, "steps": last.step, "exact_match": last.accuracy,
               "stopped_by": run.stopped_by}
    save_checkpoint(directory, run.model, [symbols], extra, metrics, dtype)
    run.replay().save(directory / REPLAY_FILE)
    return directory
