"""Writes what the engines extract into an atlas folder under construction (store.py has the layout).

Every token's row is known before the model runs (corpus.py), so the vectors go straight into preallocated
memory-mapped .npy files at their rows, batch by batch and in whatever order an engine returns batches: memory
stays at one batch whatever the corpus size. The Parquet records are written at the end, shard by shard.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.probes import ATTENTION_KINDS, TARGET
from .corpus import TokenizedCorpus
from .extract import PARTS, part_side
from .store import SENTENCES, SIDES, records_file, sample_file, sample_rows_file, stack, vectors_file

ROWS_PER_SHARD = 500_000  # tokens per Parquet shard: a shard reads in well under a second


class AtlasWriter:
    def __init__(self, folder: Path, corpus: TokenizedCorpus, config, sampled: dict[str, np.ndarray],
                 stored_layers: dict[str, tuple[int, ...]]):
        self.folder, self.corpus, self.sampled = Path(folder), corpus, sampled
        for sub in ("vectors", "records", "samples", "index", "maps"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        width, cross = config.d_model, stack(config, "cross")
        self.vectors = {(side, layer): self._array(vectors_file(side, layer), (corpus.tokens(side), width), np.float16)
                        for side in SIDES for layer in stored_layers[side]}
        shape = (corpus.tokens(TARGET), cross.layers, cross.heads)
        self.cross_argmax = np.zeros(shape, np.int16)
        self.cross_entropy = np.zeros(shape, np.float32)
        self.samples = {}
        for kind in ATTENTION_KINDS:  # each kind in its own stack's shape
            own = stack(config, kind)
            for part in PARTS:
                self.samples[kind, part] = self._array(sample_file(kind, part), (
                    own.layers, own.heads, len(sampled[part_side(kind, part)]), own.head_dim), np.float16)
        self.written = {side: 0 for side in SIDES}

    def _array(self, name: str, shape: tuple, dtype) -> np.ndarray:
        return np.lib.format.open_memmap(self.folder / name, mode="w+", dtype=dtype, shape=shape)

    def add(self, out: dict) -> int:
        """Stores one extracted batch (extract.py's dict); returns its sentence count."""
        for side in SIDES:
            rows = out[f"{side}_rows"]
            for (vector_side, layer), array in self.vectors.items():
                if vector_side == side:
                    array[rows] = out[f"{side}_hidden"][:, layer]
            self.written[side] += len(rows)
        self.cross_argmax[out[f"{TARGET}_rows"]] = out["cross_argmax"]
        self.cross_entropy[out[f"{TARGET}_rows"]] = out["cross_entropy"]
        for (kind, part), array in self.samples.items():
            slots = np.searchsorted(self.sampled[part_side(kind, part)], out[f"{kind}_{part}_rows"])
            array[:, :, slots] = out[f"{kind}_{part}"].transpose(1, 2, 0, 3)  # (n, L, H, hs) -> (L, H, n, hs)
        return len(out["sentences"])

    def finish(self, tokenizer) -> dict:
        """Flushes the vectors and writes the sentence pairs, the records and the sample rows; returns the counts
        atlas.json keeps. Every token must have been written exactly once."""
        for side in SIDES:
            if self.written[side] != self.corpus.tokens(side):
                raise RuntimeError(f"{self.written[side]} {side} tokens were extracted, the corpus has "
                                   f"{self.corpus.tokens(side)}: an engine lost or repeated a batch")
        for array in (*self.vectors.values(), *self.samples.values()):
            array.flush()
        for side in SIDES:
            np.save(self.folder / sample_rows_file(side), self.sampled[side])
        self._write_sentences()
        shards = {side: self._write_records(side, tokenizer) for side in SIDES}
        return {"sentences": len(self.corpus), "tokens": {side: self.corpus.tokens(side) for side in SIDES},
                "shards": shards, "sample": {side: len(self.sampled[side]) for side in SIDES}}

    def _write_sentences(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({SIDES[0]: self.corpus.source_text, SIDES[1]: self.corpus.target_text})
        pq.write_table(table, self.folder / SENTENCES)

    def _write_records(self, side: str, tokenizer) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        ids = self.corpus.ids[side]
        lengths = np.diff(self.corpus.offsets[side])
        sentence = np.repeat(np.arange(len(ids), dtype=np.int32), lengths)
        position = (np.arange(self.corpus.tokens(side)) - np.repeat(self.corpus.offsets[side][:-1], lengths))
        token_id = np.fromiter((t for s in ids for t in s), dtype=np.int32, count=self.corpus.tokens(side))
        pieces = np.array(tokenizer.piece_table, dtype=object)
        shards = 0
        for start in range(0, self.corpus.tokens(side), ROWS_PER_SHARD):
            rows = slice(start, start + ROWS_PER_SHARD)
            columns = {"sentence": sentence[rows], "position": position[rows].astype(np.int16),
                       "token_id": token_id[rows], "piece": pa.array(pieces[token_id[rows]], pa.string())}
            if side == TARGET:
                for name, array in (("cross_argmax", self.cross_argmax), ("cross_entropy", self.cross_entropy)):
                    flat = array[rows].reshape(len(token_id[rows]), -1)
                    columns[name] = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), flat.shape[1])
            pq.write_table(pa.table(columns), self.folder / records_file(side, shards))
            shards += 1
        return shards
