"""The nearest-neighbour index over one side's residual vectors at one layer (FAISS; Johnson et al., 2019).

The choice: an inverted file (IVF) whose lists hold the vectors as float16 scalars (`IndexIVFScalarQuantizer`,
QT_fp16). The atlas stores its vectors as float16 anyway, so the index holds exactly the stored numbers, at half
the memory of a flat float32 index, and a query scans only `nprobe` of its `nlist` lists. HNSW answers a little
faster at equal recall but its graph costs ~2x the vectors' memory and is slow to build on two cores; the build
tunes `nprobe` up from 1 until recall@10 against exact search on a sample of the atlas's own tokens reaches the
target (docs/atlas.md has the measured recall and latency).

Distances are Euclidean (FAISS returns squared L2; `search` takes the root).
"""
from __future__ import annotations

import math

import numpy as np

from .store import AtlasError, require

TRAIN_PER_LIST = 64  # training vectors per list (FAISS warns below 39)
CHUNK = 100_000  # vectors converted to float32 at a time while adding or searching exactly


def faiss_module():
    return require("faiss")


def list_count(tokens: int) -> int:
    """nlist: ~4 sqrt(N) lists (FAISS's guideline for up to a million vectors), with enough vectors to train each."""
    return max(1, min(int(4 * math.sqrt(tokens)), tokens // TRAIN_PER_LIST))


def build_index(vectors: np.ndarray, seed: int = 0):
    """An IVF-fp16 index over `vectors` (N, D) float16, ids = rows; nprobe 1 until `tune` sets it."""
    faiss = faiss_module()
    tokens, width = vectors.shape
    lists = list_count(tokens)
    index = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatL2(width), width, lists, faiss.ScalarQuantizer.QT_fp16,
                                          faiss.METRIC_L2)
    index.by_residual = False  # encode the vectors themselves, not their offset from a centroid: float16 holds them
    rng = np.random.default_rng(seed)
    train_rows = np.sort(rng.choice(tokens, size=min(tokens, lists * TRAIN_PER_LIST * 4), replace=False))
    index.train(np.ascontiguousarray(vectors[train_rows], dtype=np.float32))
    for start in range(0, tokens, CHUNK):
        index.add(np.ascontiguousarray(vectors[start : start + CHUNK], dtype=np.float32))
    return index


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest rows of `vectors` for each query, by brute force in chunks: (distances, rows), each (Q, k),
    distances Euclidean, nearest first."""
    faiss = faiss_module()
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    best_d = np.full((len(queries), 0), np.inf, np.float32)
    best_i = np.zeros((len(queries), 0), np.int64)
    for start in range(0, len(vectors), CHUNK):
        block = np.ascontiguousarray(vectors[start : start + CHUNK], dtype=np.float32)
        d, i = faiss.knn(queries, block, min(k, len(block)))
        best_d, best_i = np.concatenate([best_d, d], 1), np.concatenate([best_i, i + start], 1)
        order = np.argsort(best_d, axis=1, kind="stable")[:, :k]
        best_d, best_i = np.take_along_axis(best_d, order, 1), np.take_along_axis(best_i, order, 1)
    return np.sqrt(np.maximum(best_d, 0)), best_i


def search(index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(distances, rows), each (Q, k), Euclidean, nearest first; rows of -1 where fewer than k were found."""
    d, i = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    return np.sqrt(np.maximum(d, 0)), i


def recall_at(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of the exact k neighbours that the index found (recall@k)."""
    return float(np.mean([len(set(f) & set(e)) / len(e) for f, e in zip(found, exact)]))


def tune(index, vectors: np.ndarray, target: float, queries: int = 500, k: int = 10, seed: int = 1) -> dict:
    """Sets nprobe to the smallest power of two (or all lists) whose recall@k on `queries` of the atlas's own
    tokens reaches `target`; returns {"nprobe", "nlist", "recall_at_10", "queries"}."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(vectors), size=min(queries, len(vectors)), replace=False))
    sample = np.asarray(vectors[rows], dtype=np.float32)
    k = min(k, len(vectors))
    _, exact = exact_search(vectors, sample, k)
    nprobe, recall = 1, 0.0
    while True:
        index.nprobe = nprobe
        recall = recall_at(search(index, sample, k)[1], exact)
        if recall >= target or nprobe >= index.nlist:
            break
        nprobe = min(nprobe * 2, index.nlist)
    return {"nprobe": nprobe, "nlist": int(index.nlist), "recall_at_10": round(recall, 4), "queries": len(rows)}


def write_index(index, path) -> None:
    faiss_module().write_index(index, str(path))


def read_index(path, nprobe: int):
    from pathlib import Path

    if not Path(path).is_file():
        raise AtlasError(f"{path}: file is missing from the atlas; rebuild it")
    try:
        index = faiss_module().read_index(str(path))
    except RuntimeError as error:
        raise AtlasError(f"{path}: corrupt index ({str(error).splitlines()[0]}); rebuild the atlas") from None
    index.nprobe = nprobe
    return index
