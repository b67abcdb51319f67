"""A dictionary's folder: `dictionary.safetensors` holds exactly W_enc, b_enc, W_dec and b_dec (float32), and
`config.json` its shape (d_model, n, k), its seed, where its tokens came from (the recording point, the model's
folder name, the corpus and its sentence count) and its metrics.

Loading never unpickles (safetensors and JSON only) and checks everything before the tensors are used: a missing or
unexpected tensor, a wrong shape or dtype, a config whose settings do not hold, a cut or corrupt file. Each problem
is one DictionaryError line naming the file and what is wrong.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..command_line import write_json_atomically
from ..json_files import read_json
from ..path_checks import not_a_folder
from .dictionary import DictionaryConfig, DictionaryError, SparseDictionary, checked_setting

WEIGHTS_FILE = "dictionary.safetensors"
CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class Origin:
    """Where a dictionary's training tokens came from."""

    point: str  # the recording point's name, e.g. "encoder_layers.3.output"
    model: str  # the model's folder name, e.g. "en-de"
    corpus: str  # the corpus, as the command that gathered the tokens named it
    sentences: int  # sentences of it gathered


@dataclass
class SavedDictionary:
    dictionary: SparseDictionary
    origin: Origin
    metrics: dict = field(default_factory=dict)  # name -> number, e.g. DictionaryMetrics.to_dict()


def write_atomically(path: Path, write: Callable[[str], None]) -> Path:
    """`write(temporary)` fills a temporary file beside `path`, which then takes its place: readers see the old file
    or the new one, never half of one (command_line.write_atomically does the same for text)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        write(temporary)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's is 0600
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def expected_shapes(config: DictionaryConfig) -> dict[str, tuple[int, ...]]:
    return {"W_enc": (config.d_model, config.n), "b_enc": (config.n,), "W_dec": (config.n, config.d_model),
            "b_dec": (config.d_model,)}


def save_dictionary(folder, dictionary: SparseDictionary, origin: Origin, metrics: dict | None = None) -> Path:
    """Writes the folder (made if missing), each file atomically; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: getattr(dictionary, name).detach().to("cpu", torch.float32).contiguous()
               for name in expected_shapes(dictionary.config)}
    write_atomically(folder / WEIGHTS_FILE, lambda temporary: save_file(tensors, temporary))
    write_json_atomically(folder / CONFIG_FILE, {**asdict(origin), **dictionary.config.to_dict(),
                                                 "metrics": dict(metrics or {})})
    return folder


def read_dictionary_config(path: Path) -> tuple[DictionaryConfig, Origin, dict]:
    """config.json's three parts, each field checked; a problem is one line naming the file."""
    values = read_json(path, DictionaryError)
    origin_fields = ("point", "model", "corpus", "sentences")
    try:
        for name in ("point", "model", "corpus"):
            if not isinstance(values.get(name), str):
                raise DictionaryError(f"{name} must be a string, got {values.get(name)!r}")
        sentences = checked_setting("sentences", values.get("sentences"), int, 0)
        metrics = values.get("metrics", {})
        if not isinstance(metrics, dict):
            raise DictionaryError(f"metrics must be an object, got {metrics!r}")
        config = DictionaryConfig.from_dict({key: value for key, value in values.items()
                                             if key not in origin_fields and key != "metrics"})
    except DictionaryError as error:
        raise DictionaryError(f"{path}: {error}") from None
    return config, Origin(values["point"], values["model"], values["corpus"], sentences), metrics


def read_tensors(path: Path, config: DictionaryConfig) -> dict[str, torch.Tensor]:
    """The four tensors, exactly, each of its shape in float32 and finite."""
    if not path.is_file():
        raise DictionaryError(f"{path}: file is missing")
    try:
        tensors = load_file(path)
    except (SafetensorError, OSError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise DictionaryError(f"{path}: truncated or not a safetensors file ({reason})") from None
    expected = expected_shapes(config)
    missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or extra:
        wrong = "; ".join([*([f"missing {missing}"] if missing else []), *([f"unexpected {extra}"] if extra else [])])
        raise DictionaryError(f"{path}: {wrong}: a dictionary holds exactly {list(expected)}")
    for name, shape in expected.items():
        tensor = tensors[name]
        if tensor.dtype != torch.float32:
            raise DictionaryError(f"{path}: {name} is {tensor.dtype}, not float32")
        if tuple(tensor.shape) != shape:
            raise DictionaryError(f"{path}: {name} has shape {tuple(tensor.shape)}; config.json's d_model="
                                  f"{config.d_model}, n={config.n} make it {shape}")
        if not torch.isfinite(tensor).all():
            raise DictionaryError(f"{path}: {name} holds NaN or infinite values")
    return tensors


def load_dictionary(folder, device: str | torch.device = "cpu") -> SavedDictionary:
    """The dictionary a folder holds, with its origin and metrics, in eval mode on `device`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DictionaryError(f"{folder}: dictionary folder {not_a_folder(folder)} (it must hold {WEIGHTS_FILE} "
                              f"and {CONFIG_FILE})")
    config, origin, metrics = read_dictionary_config(folder / CONFIG_FILE)
    tensors = read_tensors(folder / WEIGHTS_FILE, config)
    dictionary = SparseDictionary(config)
    dictionary.load_state_dict(tensors)
    return SavedDictionary(dictionary.to(device).eval(), origin, metrics)
