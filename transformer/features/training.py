"""Training a dictionary on a recording point's activations (N, D), as Gao et al. 2024 train theirs: Adam on the
reconstruction's squared error scaled by the data's variance (so the loss reads as a batch's FVU), plus AuxK (their
A.2) for dead latents, with the decoder's rows held at unit norm.

A run is deterministic for a seed on one thread: the initial directions and the order of the tokens come from
generators of their own, not torch's global one. It can stop after any step and go on from a saved state
(`Trainer.save_state`, `Trainer.resume`) to exactly the parameters an uncut run reaches: the state holds the
parameters, Adam's moments, where the run stands (epoch, step) and the shuffling generator's state when the current
epoch began, so the epoch's order is drawn again the same.

Shapes: N tokens, B a batch, D d_model, n latents.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from .dictionary import DictionaryConfig, DictionaryError, Reconstruction, SparseDictionary, checked_setting
from .files import write_atomically


@dataclass(frozen=True)
class TrainingSettings:
    epochs: int = 10
    batch_size: int = 1024
    learning_rate: float = 1e-3
    aux_k: int | None = None  # dead latents AuxK reconstructs the error with; None: a power of two near D / 2 (A.2)
    aux_coefficient: float = 1 / 32  # AuxK's weight in the loss (A.2)
    # a latent no token has activated for this many training tokens is dead. Gao et al. use 10M tokens; a corpus of
    # ours is ~0.5M tokens an epoch, so 0.1M marks a latent dead after a fifth of an epoch without firing
    dead_tokens: int = 100_000

    def __post_init__(self):
        checked_setting("epochs", self.epochs, int, 1)
        checked_setting("batch_size", self.batch_size, int, 1)
        checked_setting("learning_rate", self.learning_rate, float, 1e-12, 1.0)
        if self.aux_k is not None:
            checked_setting("aux_k", self.aux_k, int, 1)
        checked_setting("aux_coefficient", self.aux_coefficient, float, 0.0)
        checked_setting("dead_tokens", self.dead_tokens, int, 1)


def default_aux_k(d_model: int) -> int:
    return 2 ** max(0, round(math.log2(d_model / 2)))


@dataclass(frozen=True)
class Progress:
    """What the progress callback hears after each step."""

    epoch: int  # the epoch under way, from 1
    epochs: int
    step: int  # the batch just done in this epoch, from 1
    steps: int  # batches an epoch
    loss: float  # the batch's scaled reconstruction error (its FVU against the data's variance) + AuxK's share
    aux_loss: float  # AuxK's own, before its coefficient; 0 while no latent is dead
    dead_latents: int  # latents dead by `dead_tokens` before this step


def checked_activations(activations, d_model: int) -> torch.Tensor:
    if not isinstance(activations, torch.Tensor) or activations.ndim != 2 or activations.shape[1] != d_model \
            or len(activations) < 2:
        got = tuple(activations.shape) if isinstance(activations, torch.Tensor) else type(activations).__name__
        raise DictionaryError(f"activations must be a (tokens, d_model={d_model}) tensor of at least 2 tokens, "
                              f"got {got}")
    if not torch.isfinite(activations).all():
        raise DictionaryError("activations hold NaN or infinite values")
    return activations.float()


def fingerprint(activations: torch.Tensor) -> dict:
    """What a resumed run checks it was handed the same tokens: their count, sum and total variance."""
    x = activations.double()
    return {"tokens": len(x), "sum": float(x.sum()), "variance": float(((x - x.mean(0)) ** 2).sum(1).mean())}


def aux_k_loss(dictionary: SparseDictionary, result: Reconstruction, x: torch.Tensor, dead: torch.Tensor,
               aux_k: int) -> torch.Tensor:
    """AuxK (Gao et al. A.2): the reconstruction's error e = x - x̂ (x̂ held fixed), reconstructed by the top
    `aux_k` dead latents alone, ê = z_aux · W_dec; their squared error as a fraction of e's variance in the batch."""
    error = (x - result.reconstruction).detach()
    masked = result.pre_activations.masked_fill(~dead, float("-inf"))
    values, indices = masked.topk(min(aux_k, int(dead.sum())), dim=-1)
    error_estimate = torch.zeros_like(masked).scatter(-1, indices, values.relu()) @ dictionary.W_dec
    variance = ((error - error.mean(0)) ** 2).sum()
    if variance == 0:  # one token, or an error alike on every token: nothing for the dead latents to explain
        return torch.zeros((), device=x.device)
    return ((error - error_estimate) ** 2).sum() / variance


def remove_parallel_gradient(dictionary: SparseDictionary) -> None:
    """Drops the part of each decoder row's gradient along the row itself (Gao et al. A.1): with the rows held at
    unit norm, it would only change their length, which the renormalisation undoes."""
    rows, gradient = dictionary.W_dec.detach(), dictionary.W_dec.grad
    gradient -= (gradient * rows).sum(1, keepdim=True) * rows


class Trainer:
    """One training run: `Trainer(activations, config, settings).train()` returns the trained dictionary."""

    def __init__(self, activations: torch.Tensor, config: DictionaryConfig,
                 settings: TrainingSettings = TrainingSettings()):
        self.activations = checked_activations(activations, config.d_model)
        self.settings = settings
        self.dictionary = SparseDictionary(config).to(self.activations.device)
        with torch.no_grad():  # b_dec starts at the mean token, so the encoder starts on centred data
            self.dictionary.b_dec.copy_(self.activations.double().mean(0).float())
        self.optimizer = torch.optim.Adam(self.dictionary.parameters(), lr=settings.learning_rate)
        self.data = fingerprint(self.activations)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.epoch, self.step = 0, 0  # epochs finished; batches of the current one done
        self.epoch_start = self.generator.get_state()  # the generator when the current epoch drew its order
        self.tokens_since_active = torch.zeros(config.n, dtype=torch.long, device=self.activations.device)

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.activations) / self.settings.batch_size)

    def train(self, epochs: int | None = None, progress: Callable[[Progress], None] | None = None) -> SparseDictionary:
        """Trains until `epochs` epochs are done in all (default: the settings'), from wherever the run stands;
        `progress` hears each step."""
        epochs = self.settings.epochs if epochs is None else checked_setting("epochs", epochs, int, 1)
        size = self.settings.batch_size
        while self.epoch < epochs:
            self.generator.set_state(self.epoch_start)
            order = torch.randperm(len(self.activations), generator=self.generator).to(self.activations.device)
            while self.step < self.steps_per_epoch:
                batch = self.activations[order[self.step * size : (self.step + 1) * size]]
                loss, aux_loss, dead = self.train_step(batch)
                self.step += 1
                if progress is not None:
                    progress(Progress(self.epoch + 1, epochs, self.step, self.steps_per_epoch, loss, aux_loss, dead))
            self.epoch, self.step = self.epoch + 1, 0
            self.epoch_start = self.generator.get_state()
        return self.dictionary

    def train_step(self, x: torch.Tensor) -> tuple[float, float, int]:
        """One Adam step on the batch x (B, D): (loss, AuxK's loss, dead latents)."""
        dictionary, settings = self.dictionary, self.settings
        dead = self.tokens_since_active >= settings.dead_tokens
        result = dictionary(x)
        loss = ((x - result.reconstruction) ** 2).sum(1).mean() / self.data["variance"]
        aux_loss = torch.zeros(())
        if dead.any():
            aux_k = settings.aux_k or default_aux_k(dictionary.config.d_model)
            aux_loss = aux_k_loss(dictionary, result, x, dead, aux_k)
            loss = loss + settings.aux_coefficient * aux_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        remove_parallel_gradient(dictionary)
        self.optimizer.step()
        dictionary.normalize_decoder()
        fired = (result.z != 0).any(0)
        self.tokens_since_active = torch.where(fired, 0, self.tokens_since_active + len(x))
        return float(loss.detach()), float(aux_loss.detach()), int(dead.sum())

    def state(self) -> dict:
        return {"config": self.dictionary.config.to_dict(), "settings": asdict(self.settings), "data": self.data,
                "parameters": self.dictionary.state_dict(), "optimizer": self.optimizer.state_dict(),
                "epoch": self.epoch, "step": self.step, "epoch_start": self.epoch_start,
                "tokens_since_active": self.tokens_since_active}

    def save_state(self, path) -> Path:
        """Writes what `resume` needs to a file (torch's format, tensors and plain values only), atomically."""
        state = self.state()
        return write_atomically(Path(path), lambda temporary: torch.save(state, temporary))

    @classmethod
    def resume(cls, path, activations: torch.Tensor) -> "Trainer":
        """The run `save_state` wrote to `path`, over the same activations, ready to `train` on."""
        state = read_state(path)
        try:
            config, settings = DictionaryConfig(**state["config"]), TrainingSettings(**state["settings"])
        except (KeyError, TypeError, DictionaryError) as error:
            raise DictionaryError(f"{path}: not a training state this version can resume ({error})") from None
        trainer = cls(activations, config, settings)
        if not same_data(trainer.data, state["data"]):
            raise DictionaryError(f"{path}: these activations are not the ones the run was trained on "
                                  f"({trainer.data} against {state['data']})")
        try:
            trainer.data = state["data"]  # the variance the loss was scaled by, to the last bit
            trainer.dictionary.load_state_dict(state["parameters"])
            trainer.optimizer.load_state_dict(state["optimizer"])
            trainer.epoch, trainer.step, trainer.epoch_start = state["epoch"], state["step"], state["epoch_start"]
            trainer.tokens_since_active = state["tokens_since_active"].to(trainer.activations.device)
        except (KeyError, TypeError, RuntimeError, ValueError) as error:
            raise DictionaryError(f"{path}: not a training state this version can resume ({error})") from None
        return trainer


def same_data(found: dict, saved: dict) -> bool:
    """Whether two fingerprints describe the same tokens: float64 sums may differ in their last bits with the thread
    count that summed them."""
    return (isinstance(saved, dict) and saved.keys() == found.keys() and found["tokens"] == saved["tokens"]
            and all(math.isclose(found[key], saved[key], rel_tol=1e-9) for key in ("sum", "variance")))


def read_state(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise DictionaryError(f"{path}: training state file is missing")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)  # never unpickles code
    except Exception as error:  # torch.load raises many kinds on a cut or foreign file; each means the same here
        raise DictionaryError(f"{path}: truncated or not a training state ({type(error).__name__})") from None
    if not isinstance(state, dict):
        raise DictionaryError(f"{path}: not a training state (it holds {type(state).__name__})")
    return state
