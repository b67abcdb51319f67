"""A TopK sparse autoencoder: a dictionary of n directions in a recording point's d_model-wide space, of which each
token uses at most k (Gao et al. 2024, "Scaling and evaluating sparse autoencoders", section 2.3):

    z = TopK(ReLU((x - b_dec) · W_enc + b_enc))      the token's code: its k largest pre-activations, the rest 0
    x̂ = z · W_dec + b_dec                             its reconstruction: b_dec plus the active latents' rows

Shapes: N tokens, D d_model, n latents. W_enc (D, n), b_enc (n,), W_dec (n, D) with unit-norm rows (each row is one
latent's direction, so z's values are the lengths along them), b_dec (D,), all float32. A code is a dense (N, n)
tensor with at most k non-zeros per row (fewer only where fewer than k pre-activations are positive).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from ..choices import type_phrase
from ..numbers import NumberError, checked_number


class DictionaryError(ValueError):
    """A bad setting, input or file of a sparse dictionary; the message names the setting or the file."""


def checked_setting(name: str, value, kind: type = int, low=None, high=None):
    """`numbers.checked_number`, its failure a DictionaryError naming `name`."""
    try:
        return checked_number(name, value, kind, low, high)
    except NumberError as error:
        raise DictionaryError(str(error)) from None


@dataclass(frozen=True)
class DictionaryConfig:
    d_model: int  # width of the recording point's vectors
    n: int  # latents: the dictionary's directions
    k: int  # latents active per token (TopK)
    seed: int = 0  # draws the initial directions and, in training, the order of the tokens

    def __post_init__(self):
        checked_setting("d_model", self.d_model, int, 1)
        checked_setting("n", self.n, int, 1)
        checked_setting("k", self.k, int, 1)
        checked_setting("seed", self.seed, int, 0, 2**63 - 1)
        if self.k > self.n:
            raise DictionaryError(f"k must be at most n (the latents, {self.n}), got k={self.k}: lower k or raise n")

    @classmethod
    def from_dict(cls, values: dict) -> "DictionaryConfig":
        """From a saved config's fields; an unknown or missing one is a DictionaryError naming it."""
        names = {field.name for field in fields(cls)}
        unknown, missing = sorted(set(values) - names), sorted({"d_model", "n", "k"} - set(values))
        if unknown or missing:
            wrong = ", ".join([*(f"unknown setting {u!r}" for u in unknown), *(f"missing {m!r}" for m in missing)])
            raise DictionaryError(f"dictionary config: {wrong} (it takes {sorted(names)})")
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Reconstruction:
    """One forward pass over (N, D) tokens."""

    reconstruction: torch.Tensor  # (N, D) x̂
    z: torch.Tensor  # (N, n) the codes, at most k non-zeros per row
    pre_activations: torch.Tensor  # (N, n) (x - b_dec) · W_enc + b_enc before ReLU and TopK: AuxK picks dead ones


def top_k(pre_activations: torch.Tensor, k: int) -> torch.Tensor:
    """The k largest of each row after ReLU, in place, and zeros elsewhere (TopK and ReLU commute: ReLU is
    monotone, so the k largest after it are the k largest before it)."""
    values, indices = pre_activations.topk(k, dim=-1)
    return torch.zeros_like(pre_activations).scatter(-1, indices, values.relu())


class SparseDictionary(nn.Module):
    def __init__(self, config: DictionaryConfig):
        super().__init__()
        self.config = config
        # Gao et al. A.1: the encoder starts as the decoder's transpose, the decoder's rows of unit norm; a generator
        # of its own keeps the draw independent of torch's global random state
        generator = torch.Generator().manual_seed(config.seed)
        directions = torch.randn(config.n, config.d_model, generator=generator)
        directions /= directions.norm(dim=1, keepdim=True)
        self.W_enc = nn.Parameter(directions.T.clone())
        self.b_enc = nn.Parameter(torch.zeros(config.n))
        self.W_dec = nn.Parameter(directions)
        self.b_dec = nn.Parameter(torch.zeros(config.d_model))  # the data's mean once training starts

    def checked_input(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.ndim < 1 or x.shape[-1] != self.config.d_model:
            got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type_phrase(x)
            raise DictionaryError(f"x must be a tensor of shape (..., d_model={self.config.d_model}), got {got}")
        return x.to(self.W_enc.dtype)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., n): (x - b_dec) · W_enc + b_enc."""
        return (self.checked_input(x) - self.b_dec) @ self.W_enc + self.b_enc

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., n) codes with at most k non-zeros in each row."""
        return top_k(self.pre_activations(x), self.config.k)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """(..., n) -> (..., D): z · W_dec + b_dec."""
        return z @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> Reconstruction:
        pre_activations = self.pre_activations(x)
        z = top_k(pre_activations, self.config.k)
        return Reconstruction(self.decode(z), z, pre_activations)

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Scales each row of W_dec back to unit norm (after an optimizer step moved it)."""
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True))

    def extra_repr(self) -> str:
        return f"d_model={self.config.d_model}, n={self.config.n}, k={self.config.k}"
