"""An atlas folder on disk, and the one error every atlas problem raises.

    OUT/
      atlas.json                       what it is: checkpoint identity and hash, corpus, counts, versions, settings
      sentences.parquet                the sentence pairs, row = sentence index
      records/{side}-NNNNN.parquet     one row per token: sentence, position, token id, piece (+ cross statistics)
      vectors/{side}-layer-N.npy       residual stream after layer N (from 1), float16 (tokens of that side, D)
      index/{side}-layer-N.faiss       the approximate nearest-neighbour index over that file (index.py)
      samples/{kind}-{queries|keys}.npy  each head's sampled vectors, float16 (layers, heads, sample, head size)
      samples/{side}-rows.npy          which token rows of that side the samples are
      maps/{kind}.npz                  each head's 2-D map and what places a new point on it (maps.py)

The encoder and the decoder may differ in shape (ModelConfig.encoder, .decoder; a distilled OPUS-MT student has 6
encoder and 2 decoder layers): each attention kind is laid out with its own stack's layers, heads and head size
(encoder_self the encoder's; decoder_self and cross the decoder's), and each side's layers are its stack's (source
the encoder's, target the decoder's). `stack` says which.

Token rows of a side are in sentence order, then position order, so a vector's row, its record's row and its
index id are one number. Positions are stored from 0; what people read counts them from 1 (query.py).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..choices import ChoiceError, checked_choice
from ..command_line import InputError
from ..core.head_ref import shown
from ..core.probes import SOURCE, TARGET
from ..json_files import read_json
from ..path_checks import not_a_folder

MANIFEST, SENTENCES = "atlas.json", "sentences.parquet"
# atlas.json's "format": raised when the layout changes, so an older reader refuses a newer folder. Format 1 (the
# shipped atlases) had stacks of one shape and one list of indexed layers for both sides; it is read as it is.
FORMAT = 2
READABLE = (1, 2)
SIDES = (SOURCE, TARGET)
# the stack whose layers make each side's residual stream, and whose heads each attention kind has (a kind belongs
# to the stack of its queries' side, as ModelConfig.stack_of says; tests/test_atlas_stacks.py holds them equal)
STACK_OF = {SOURCE: "encoder", TARGET: "decoder", "encoder_self": "encoder", "decoder_self": "decoder",
            "cross": "decoder"}


class AtlasError(InputError):
    """An atlas, corpus or setting that cannot be used; the message names the file or value and what to do."""


def stack_name(name: str) -> str:
    """"encoder" or "decoder": the stack an attention kind or a side's residual stream belongs to."""
    try:
        checked_choice("kind", name, STACK_OF)
    except ChoiceError as error:
        raise AtlasError(str(error)) from None
    return STACK_OF[name]


def stack(config, name: str):
    """The shape (core/config.py's StackShape: layers, heads, d_ff, head_dim) of that stack."""
    return getattr(config, stack_name(name))


def stack_text(config, name: str) -> str:
    """What a range message adds: " (cross is the decoder's: 2 layers of 8 heads)", " (the source side is the
    encoder's: 6 layers)"."""
    shape = stack(config, name)
    if name in SIDES:
        return f" (the {name} side is the {stack_name(name)}'s: {shape.layers} layers)"
    return f" ({name} is the {stack_name(name)}'s: {shape.layers} layers of {shape.heads} heads)"


def require(module: str):
    """An import of one of the atlas extra's packages; without it, an AtlasError saying how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise AtlasError(f'the atlas needs {module.split(".")[0]}: pip install ".[atlas]" '
                         "(pyarrow, faiss-cpu, openTSNE)") from None


def vectors_file(side: str, layer: int) -> str:
    return f"vectors/{side}-layer-{shown(layer)}.npy"


def index_file(side: str, layer: int) -> str:
    return f"index/{side}-layer-{shown(layer)}.faiss"


def sample_file(kind: str, part: str) -> str:
    return f"samples/{kind}-{part}.npy"


def sample_rows_file(side: str) -> str:
    return f"samples/{side}-rows.npy"


def map_file(kind: str) -> str:
    return f"maps/{kind}.npz"


def records_file(side: str, shard: int) -> str:
    return f"records/{side}-{shard:05d}.parquet"


def file_hash(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file, read in chunks (weights of hundreds of MB stay out of memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    if not Path(folder).is_dir():
        raise AtlasError(f"{folder}: atlas folder {not_a_folder(folder)} (build one with "
                         "`python -m transformer.atlas build`)")
    if not path.is_file():
        raise AtlasError(f"{path}: file is missing: {folder} is not an atlas, or its build did not finish")
    try:
        manifest = read_json(path, AtlasError)
    except AtlasError as error:
        raise AtlasError(f"{path}: corrupt, {str(error).removeprefix(f'{path}: ')}; rebuild the atlas") from None
    if manifest.get("format") not in READABLE:
        raise AtlasError(f"{path}: not an atlas of format {' or '.join(map(str, READABLE))}; rebuild it with this "
                         "version of the package")
    return manifest


def load_array(folder: Path, name: str, shape: tuple | None = None, dtype=None, mmap: bool = True) -> np.ndarray:
    """A stored .npy array, memory-mapped; a missing, truncated or reshaped file is an AtlasError naming it."""
    path = Path(folder) / name
    if not path.is_file():
        raise AtlasError(f"{path}: file is missing from the atlas; rebuild it")
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise AtlasError(f"{path}: corrupt or truncated ({error}); rebuild the atlas") from None
    if (shape is not None and tuple(array.shape) != tuple(shape)) or (dtype is not None and array.dtype != dtype):
        raise AtlasError(f"{path}: holds {array.dtype} {list(array.shape)}, atlas.json says "
                         f"{np.dtype(dtype) if dtype is not None else array.dtype} {list(shape or array.shape)}; "
                         "rebuild the atlas")
    return array


def read_table(folder: Path, name: str):
    pa, pq = require("pyarrow"), require("pyarrow.parquet")

    path = Path(folder) / name
    if not path.is_file():
        raise AtlasError(f"{path}: file is missing from the atlas; rebuild it")
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise AtlasError(f"{path}: corrupt Parquet file ({error}); rebuild the atlas") from None
