"""Checkpoint folders: config.json, model.safetensors, spm.model, metrics.json.

A Marian model converted from Hugging Face (convert_marian.py) keeps its tokenizer as source.spm, target.spm and
vocab.json instead of spm.model, which config.json's "tokenizer" section names ("type": "marian").

Loading never unpickles: weights come only through safetensors, settings through JSON. Every problem
is reported as a `CheckpointError` naming the file and what is wrong with it.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from .core.attention import stack_separate_projections
from .core.config import ModelConfig
from .core.model import Transformer
from .hub_tokenizer import HubTokenizer
from .json_files import read_json
from .marian_tokenizer import MarianTokenizer
from .path_checks import not_a_folder
from .symbol_tokenizer import SYMBOLS_FILE, SymbolTokenizer
from .tokenizer import Tokenizer
from .weights_file import WeightsFile

CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE, METRICS_FILE = (
    "config.json",
    "model.safetensors",
    "spm.model",
    "metrics.json",
)
# the checkpoints shipped with the repository, found by name ("en-de") from any directory: installed with
# `pip install .` they are the package data transformer/checkpoints/ (setup.py maps the repository's checkpoints/
# there); in a clone or an editable install they are the repository's checkpoints/
_PACKAGED, _REPOSITORY = (Path(__file__).resolve().parent / "checkpoints",
                          Path(__file__).resolve().parent.parent / "checkpoints")
SHIPPED_ROOT = _PACKAGED if _PACKAGED.is_dir() else _REPOSITORY


class CheckpointError(ValueError):
    pass


def unique_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """State dict without the aliases that weight sharing creates (safetensors refuses shared storage)."""
    seen, state = set(), {}
    for name, tensor in model.state_dict().items():
        key = (tensor.data_ptr(), tensor.shape)
        if key not in seen:
            seen.add(key)
            state[name] = tensor
    return state


def save_checkpoint(directory, model: Transformer, tokenizer_file, extra_config: dict | None = None,
                    metrics: dict | None = None, dtype: torch.dtype = torch.float32) -> Path:
    """`tokenizer_file`: the spm.model to copy in, or a list of the tokenizer's files (a Marian tokenizer's three)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {"model": model.config.to_dict(), **(extra_config or {})}
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    state = {name: t.detach().to("cpu", dtype).contiguous() for name, t in unique_state_dict(model).items()}
    save_file(state, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
    files = [Path(tokenizer_file)] if isinstance(tokenizer_file, (str, Path)) else [Path(f) for f in tokenizer_file]
    for file in files:
        # a single file is the spm.model whatever its name; a list keeps the names the tokenizer reads
        target = directory / (TOKENIZER_FILE if isinstance(tokenizer_file, (str, Path)) else file.name)
        if file.resolve() != target.resolve():
            target.write_bytes(file.read_bytes())
    if metrics is not None:
        (directory / METRICS_FILE).write_text(json.dumps(metrics, indent=2) + "\n")
    return directory


def read_config(directory) -> tuple[dict, ModelConfig]:
    path = Path(directory) / CONFIG_FILE
    config = read_json(path, CheckpointError)
    if "model" not in config:
        raise CheckpointError(f"{path}: has no 'model' section")
    try:
        return config, ModelConfig.from_dict(config["model"])
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: {error}") from error


def load_weights(model: Transformer, path: Path) -> None:
    """Every saved tensor of `model` read from `path` straight into its memory, one at a time (weights_file.py: a
    large model is never held twice): names and shapes are checked against the model before any is read."""
    if not path.is_file():
        raise CheckpointError(f"{path}: file is missing")
    try:
        with WeightsFile(path) as stored:
            if any(name.endswith("q_proj.weight") for name in stored.shapes):
                # written before q, k and v were stacked: read whole and stacked
                tensors = stack_separate_projections({name: stored.read(name) for name in stored.shapes})
                copy_checked(model, {name: tuple(t.shape) for name, t in tensors.items()},
                             lambda name, tensor: tensor.copy_(tensors[name]), path)
            else:
                copy_checked(model, stored.shapes, stored.read_into, path)
    except (OSError, ValueError) as error:
        if isinstance(error, CheckpointError):
            raise
        raise CheckpointError(f"{path}: truncated or not a safetensors file ({error})") from error


def copy_checked(model: Transformer, shapes: dict[str, tuple], fill, path: Path) -> None:
    """`fill(name, tensor)` for each of the model's saved tensors, once every name and shape matches; a tensor that
    holds NaN or infinity is named."""
    expected = unique_state_dict(model)
    missing, unexpected = sorted(set(expected) - set(shapes)), sorted(set(shapes) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: does not match config.json (missing tensors {missing[:5]}, unexpected {unexpected[:5]})"
        )
    for name, tensor in expected.items():
        if shapes[name] != tuple(tensor.shape):
            raise CheckpointError(
                f"{path}: tensor {name!r} has shape {list(shapes[name])} but config.json implies {list(tensor.shape)}"
            )
    with torch.no_grad():
        for name, tensor in expected.items():
            fill(name, tensor)
            if not torch.isfinite(tensor).all():
                raise CheckpointError(f"{path}: tensor {name!r} holds NaN or infinite values")


def checkpoint_folder(directory) -> Path:
    """`directory` itself, or the shipped checkpoint of that name (e.g. "en-de")."""
    directory = Path(directory)
    if directory.is_dir():
        return directory
    shipped = SHIPPED_ROOT / directory
    if len(directory.parts) == 1 and (shipped / CONFIG_FILE).is_file():
        return shipped
    if not SHIPPED_ROOT.is_dir():  # a copy of the package made without its checkpoints
        raise CheckpointError(
            f"{directory}: no checkpoint folder of that name here, and this copy of the package has no shipped "
            f"checkpoints (installed from a clone with `pip install .` or `pip install -e .`, they come with it). "
            f"Pass the folder's path, e.g. Translator.from_pretrained('path/to/attention-explorer/checkpoints/"
            f"{directory}'), or install the package from the repository so that names such as "
            f"{str(directory)!r} resolve")
    names = sorted(p.name for p in SHIPPED_ROOT.iterdir() if (p / CONFIG_FILE).is_file())
    raise CheckpointError(f"{directory}: checkpoint folder {not_a_folder(directory)}, and no shipped checkpoint has "
                          f"that name (shipped: {names or 'none'})")


def load_checkpoint(directory, device="cpu") -> tuple[Transformer, Tokenizer, dict]:
    """Returns (model in eval mode, tokenizer, config.json contents). `directory` is a folder or the name
    of a shipped checkpoint."""
    directory = checkpoint_folder(directory)
    config, model_config = read_config(directory)
    model = Transformer.empty(model_config)  # every tensor is read from the file below
    load_weights(model, directory / WEIGHTS_FILE)
    tokenizer, vocabulary_file = load_tokenizer(directory, config, model_config)
    if tokenizer.vocab_size != model_config.tgt_vocab_size or tokenizer.vocab_size != model_config.src_vocab_size:
        raise CheckpointError(
            f"{vocabulary_file}: vocabulary of {tokenizer.vocab_size} pieces does not match config.json "
            f"(src {model_config.src_vocab_size}, tgt {model_config.tgt_vocab_size})"
        )
    for name, expected in (("pad", model_config.pad_id), ("unk", model_config.unk_id), ("eos", model_config.eos_id),
                           ("bos", model_config.decoder_start_id)):
        if getattr(tokenizer, f"{name}_id") != expected:
            actual = getattr(tokenizer, f"{name}_id")
            raise CheckpointError(f"{vocabulary_file}: the tokenizer's {name} id is {actual}, config.json's model "
                                  f"says {expected}")
    return model.to(device).eval(), tokenizer, config


def load_tokenizer(directory: Path, config: dict, model_config: ModelConfig):
    """The tokenizer config.json names (ours: spm.model; "type": "marian": Marian's three files; "type": "symbols":
    a playground task's symbols.json), and the file
    that holds its vocabulary, for messages."""
    kind = config.get("tokenizer", {}).get("type")
    try:
        if kind == "marian":
            return MarianTokenizer.load(directory, model_config.decoder_start_id), directory / "vocab.json"
        if kind == "hub":  # a converted Hugging Face family's tokenizer.json (convert.py)
            return HubTokenizer.load(directory, config["tokenizer"]), directory / "tokenizer.json"
        if kind == "symbols":  # a playground model's toy vocabulary (transformer/playground/)
            return SymbolTokenizer.load(directory / SYMBOLS_FILE), directory / SYMBOLS_FILE
        return Tokenizer.load(directory / TOKENIZER_FILE), directory / TOKENIZER_FILE
    except (FileNotFoundError, ValueError) as error:
        raise CheckpointError(str(error)) from error


def read_metrics(directory) -> dict | None:
    path = Path(directory) / METRICS_FILE
    return read_json(path, CheckpointError) if path.is_file() else None
