"""Reading an atlas folder (store.py has the layout): checked on opening, loaded piece by piece as it is asked.

    atlas = Atlas.open("atlases/en-de")
    atlas.check_checkpoint("checkpoints/en-de")     # an atlas of another checkpoint is refused, named
    atlas.record("target", 1234)                    # {"sentence": 17, "position": 3, "piece": "▁Hund", ...}
    atlas.stack("cross").heads, atlas.indexed["source"]  # each kind's and side's own stack (store.py)
"""
from __future__ import annotations

from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from ..checkpoint import WEIGHTS_FILE, CheckpointError, checkpoint_folder
from ..core.config import ModelConfig, StackShape
from ..core.head_ref import shown
from .index import read_index
from .maps import HeadMap, load_maps
from .store import (
    SENTENCES,
    SIDES,
    AtlasError,
    file_hash,
    index_file,
    load_array,
    map_file,
    read_manifest,
    read_table,
    records_file,
    sample_file,
    sample_rows_file,
    stack,
    stack_text,
    vectors_file,
)


class Atlas:
    def __init__(self, folder: Path, manifest: dict):
        self.folder, self.manifest = folder, manifest
        try:
            self.config = ModelConfig.from_dict(manifest["model"])
        except ValueError as error:
            raise AtlasError(f"{folder / 'atlas.json'}: its model is not a valid configuration ({error}); rebuild "
                             "the atlas") from None
        self.width = self.config.d_model
        self.tokens = manifest["counts"]["tokens"]
        indexed = manifest["indexed_layers"]  # format 1: one list for both sides (whose stacks had one shape)
        # side -> the 0-based layers whose vectors are stored and indexed there
        self.indexed = {side: tuple(indexed[side] if isinstance(indexed, dict) else indexed) for side in SIDES}
        self._tables: dict = {}

    @classmethod
    def open(cls, folder) -> "Atlas":
        """An atlas folder, its atlas.json read and its files checked for presence and size."""
        folder = Path(folder)
        manifest = read_manifest(folder)
        try:
            atlas = cls(folder, manifest)
            for side in SIDES:
                for layer in atlas.indexed[side]:
                    if manifest["settings"].get("keep_vectors", True):
                        atlas.vectors(side, layer)
                    if not (folder / index_file(side, layer)).is_file():
                        raise AtlasError(f"{folder / index_file(side, layer)}: file is missing from the atlas; "
                                         "rebuild it")
        except (KeyError, TypeError) as error:
            raise AtlasError(f"{folder / 'atlas.json'}: corrupt, lacks {error}; rebuild the atlas") from None
        return atlas

    def stack(self, name: str) -> StackShape:
        """The shape of the stack an attention kind or a side belongs to (store.stack): its layers, heads, head
        size."""
        return stack(self.config, name)

    def stack_text(self, name: str) -> str:
        return stack_text(self.config, name)

    @property
    def checkpoint(self) -> dict:
        return self.manifest["checkpoint"]

    def check_checkpoint(self, checkpoint) -> Path:
        """The checkpoint folder, when its weights are the ones this atlas was built from; else an AtlasError."""
        try:
            folder = checkpoint_folder(checkpoint)
        except CheckpointError as error:
            raise AtlasError(str(error)) from None
        weights = folder / WEIGHTS_FILE
        if not weights.is_file() or file_hash(weights) != self.checkpoint["weights_sha256"]:
            raise AtlasError(f"{self.folder}: this atlas was built from another checkpoint "
                             f"({self.checkpoint['name']}, weights sha256 {self.checkpoint['weights_sha256'][:12]}…), "
                             f"not {folder}; build one for it with `python -m transformer.atlas build`")
        return folder

    def vectors(self, side: str, layer: int) -> np.ndarray:
        """(tokens of `side`, D) float16: memory-mapped, or read back from the index in an --index-only atlas."""
        if self.manifest["settings"].get("keep_vectors", True):
            return load_array(self.folder, vectors_file(side, layer), (self.tokens[side], self.width), np.float16)
        index = self.index(side, layer)
        index.make_direct_map()
        return index.reconstruct_n(0, index.ntotal).astype(np.float16)  # exact: the index stores float16

    @lru_cache(maxsize=None)  # noqa: B019 - one Atlas per folder, kept for the program's life
    def index(self, side: str, layer: int):
        stats = self.manifest["index"]["per_layer"][f"{side}-layer-{shown(layer)}"]
        return read_index(self.folder / index_file(side, layer), stats["nprobe"])

    @cached_property
    def sentences(self):
        table = read_table(self.folder, SENTENCES)
        if table.num_rows != self.manifest["counts"]["sentences"]:
            raise AtlasError(f"{self.folder / SENTENCES}: {table.num_rows} rows, atlas.json says "
                             f"{self.manifest['counts']['sentences']}; rebuild the atlas")
        return table

    def records(self, side: str):
        """Every token record of `side` (a pyarrow Table, shards concatenated), rows = token rows."""
        if side not in self._tables:
            import pyarrow as pa

            shards = self.manifest["counts"]["shards"][side]
            table = pa.concat_tables([read_table(self.folder, records_file(side, s)) for s in range(shards)])
            if table.num_rows != self.tokens[side]:
                raise AtlasError(f"{self.folder}/records: {table.num_rows} {side} records, atlas.json says "
                                 f"{self.tokens[side]}; rebuild the atlas")
            self._tables[side] = table
        return self._tables[side]

    def record(self, side: str, row: int) -> dict:
        return {name: values[0] for name, values in self.records(side).slice(row, 1).to_pydict().items()}

    def sentence(self, index: int) -> dict:
        return {name: values[0] for name, values in self.sentences.slice(index, 1).to_pydict().items()}

    @lru_cache(maxsize=None)  # noqa: B019
    def maps(self, kind: str) -> tuple[list[list[HeadMap]], str]:
        path = self.folder / map_file(kind)
        if not path.is_file():
            raise AtlasError(f"{path}: file is missing from the atlas; rebuild it")
        try:
            maps, projection = load_maps(path)
        except (OSError, ValueError, KeyError) as error:
            raise AtlasError(f"{path}: corrupt ({error}); rebuild the atlas") from None
        if (len(maps), len(maps[0])) != self.stack(kind)[:2]:
            raise AtlasError(f"{path}: holds {len(maps)} layers of {len(maps[0])} heads, atlas.json's model has "
                             f"{self.stack(kind).layers} of {self.stack(kind).heads}; rebuild the atlas")
        return maps, projection

    def samples(self, kind: str, part: str) -> np.ndarray:
        """(L, H, sample, hs) float16: the sampled tokens' queries or keys, in the kind's stack's shape."""
        return load_array(self.folder, sample_file(kind, part))

    def sample_rows(self, side: str) -> np.ndarray:
        return load_array(self.folder, sample_rows_file(side), mmap=False)
