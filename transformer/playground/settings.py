"""What a playground run is: a task, a model and a seed, and how long it trains. One typed dataclass, checked in one
place (`Settings.checked`), so the CLI, the page and a shared link refuse a bad value with one message that names
the setting and its allowed range.

The models range from the seed notebooks' smallest (width 8, 8 heads, 6 layers; 9,206 parameters over their
vocabulary of 6) to 2 layers x 4 heads x width 64; the feed-forward block is twice the width, as in the notebooks.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ..choices import checked_choice
from ..core.config import NORM_PLACEMENTS, POSITIONAL_ENCODINGS, ModelConfig
from ..numbers import NumberError, checked_number
from .tasks import TASKS

LIMITS = {  # setting -> (kind, lowest, highest)
    "layers": (int, 1, 6), "heads": (int, 1, 8), "width": (int, 8, 64), "seed": (int, 0, 2**31 - 1),
    "steps": (int, 1, 5000), "batch_size": (int, 1, 512), "learning_rate": (float, 1e-5, 0.1),
    "warmup_ratio": (float, 0.0, 0.5), "redraw_every": (int, 1, 1000), "time_cap": (float, 0.1, 600.0),
    "held_out": (int, 1, 1000),
}
# how the learning rate moves after the warm-up (trainer.learning_rate): "cosine" falls along a half cosine to
# LR_FLOOR x learning_rate at the last update; "constant" stays at learning_rate (with warmup_ratio 0: a constant
# rate throughout)
SCHEDULES = ("cosine", "constant")
LR_FLOOR = 0.1
MAX_PIECES = 16  # the longest source or target of any task, with its </s>: the positions every model covers


class SettingsError(ValueError):
    """A run's setting out of its range; the message names the setting."""


@dataclass(frozen=True)
class Settings:
    task: str = "reverse"
    layers: int = 2
    heads: int = 2
    width: int = 32  # d_model; the feed-forward block is 2 x width
    pos_encoding: str = "sinusoidal"
    norm: str = "pre"
    seed: int = 1
    steps: int = 400
    batch_size: int = 64
    learning_rate: float = 3e-3  # Adam's peak, reached at the end of the warm-up
    warmup_ratio: float = 0.1  # the share of `steps` (rounded) whose learning rate rises linearly to the peak
    schedule: str = "cosine"  # after the warm-up: one of SCHEDULES
    redraw_every: int = 20  # the probe's attention and the held-out accuracy every this many updates
    time_cap: float = 120.0  # seconds; the run stops there, trained or not
    held_out: int = 200  # fresh examples scored at each redraw (a closed task, numbers, scores all of its own)

    @classmethod
    def checked(cls, **values) -> "Settings":
        """The settings from `values` (names of the fields; a missing one takes its default), each checked: an
        unknown name, a value out of range, NaN, or a width its heads do not divide is a SettingsError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise SettingsError(f"unknown settings {unknown}; the settings are {sorted(known)}")
        merged = {**asdict(cls()), **values}
        try:
            checked_choice("task", merged["task"], TASKS, unknown=f"task must be one of {sorted(TASKS)}, got "
                                                                 f"{merged['task']!r}")
            checked_choice("pos_encoding", merged["pos_encoding"], POSITIONAL_ENCODINGS)
            checked_choice("norm", merged["norm"], NORM_PLACEMENTS)
            checked_choice("schedule", merged["schedule"], SCHEDULES)
            for name, (kind, low, high) in LIMITS.items():
                merged[name] = checked_number(name, merged[name], kind, low, high)
        except (NumberError, ValueError) as error:
            raise SettingsError(str(error)) from None
        if merged["width"] % merged["heads"]:
            raise SettingsError(f"width ({merged['width']}) must be divisible by heads ({merged['heads']}): each "
                                "head reads an equal slice of the width")
        return cls(**merged)

    def model_config(self, vocab_size: int) -> ModelConfig:
        # no dropout: a toy task has no noise to regularise against, and the curve is then the model's own
        return ModelConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=self.width,
                           n_heads=self.heads, n_layers=self.layers, d_ff=2 * self.width, dropout=0.0,
                           max_len=MAX_PIECES, norm=self.norm, pos_encoding=self.pos_encoding)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """ "2 layers × 2 heads × width 32, sinusoidal, pre-norm, seed 1" """
        layers = f"{self.layers} layer{'s' * (self.layers > 1)}"
        heads = f"{self.heads} head{'s' * (self.heads > 1)}"
        return f"{layers} × {heads} × width {self.width}, {self.pos_encoding}, {self.norm}-norm, seed {self.seed}"


def default_settings(task: str) -> Settings:
    """A task's default run: its default model and seed 1."""
    model = TASKS[checked_choice("task", task, TASKS)]
    return Settings.checked(task=task, steps=model.steps, **model.model)
