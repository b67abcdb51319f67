"""Each head's map: its sampled queries and keys in one plane (AttentionViz; Yeh et al., IEEE VIS 2023).

Before projecting, the keys are moved so their centroid is the queries' (k' = k - mean(k) + mean(q)): every
score q·k' then differs from q·k by q·(mean(q) - mean(k)), the same for all keys of a query, so the softmax is
unchanged. Queries are scaled by c and keys by 1/c so both have the same mean norm, which leaves q·k unchanged
too. Then queries and keys are projected together to 2-D:

- "tsne": openTSNE (Poličar et al., 2024), whose `transform` places new points (the translation on screen) into
  the finished map without moving the corpus's points;
- "pca": the first two principal components, instant, and new points are placed by the same linear map.

t-SNE's cost grows with the points and the iterations, and a build maps every head of every kind (48 for the shipped
4 x 4 models), so its maps are made from fewer tokens (DEFAULT_SAMPLE) with fewer iterations than openTSNE's default,
Barnes-Hut gradients (faster than the FFT ones below ~10,000 points) and every core: about 2 s a head of 1,000 points
on a 2-core machine (docs/atlas.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PROJECTIONS = ("tsne", "pca")
# tokens per side whose queries and keys a map is made from, by default: AttentionViz's 5-10k for the instant PCA,
# fewer for t-SNE, whose time per head grows with them
DEFAULT_SAMPLE = {"tsne": 500, "pca": 10_000}


@dataclass
class Normalisation:
    key_shift: np.ndarray  # (hs,) added to every key: mean(q) - mean(k)
    scale: float  # queries times scale, keys divided by it

    def queries(self, q: np.ndarray) -> np.ndarray:
        return np.asarray(q, np.float32) * self.scale

    def keys(self, k: np.ndarray) -> np.ndarray:
        return (np.asarray(k, np.float32) + self.key_shift) / self.scale


def normalisation(queries: np.ndarray, keys: np.ndarray) -> Normalisation:
    queries, keys = np.asarray(queries, np.float32), np.asarray(keys, np.float32)
    shift = queries.mean(0) - keys.mean(0)
    query_norm = np.linalg.norm(queries, axis=1).mean()
    key_norm = np.linalg.norm(keys + shift, axis=1).mean()
    scale = float(np.sqrt(key_norm / query_norm)) if query_norm > 0 and key_norm > 0 else 1.0
    return Normalisation(shift.astype(np.float32), scale)


def pca(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean (hs,), components (2, hs)) of the points' first two principal axes, signs fixed (largest entry > 0).
    From the (hs, hs) covariance's eigenvectors, in float64: for 20,000 points of 64 features ~10x faster than an
    SVD of the points themselves, with the same axes."""
    mean = points.mean(0, dtype=np.float64)
    centred = np.asarray(points, np.float64) - mean
    values, vectors = np.linalg.eigh(centred.T @ centred)
    axes = vectors[:, np.argsort(values)[::-1][:2]].T  # (2, hs), largest variance first
    components = np.zeros((2, points.shape[1]), np.float32)
    components[: len(axes)] = axes
    signs = np.sign(components[np.arange(2), np.abs(components).argmax(1)])
    return mean.astype(np.float32), (components * np.where(signs == 0, 1, signs)[:, None]).astype(np.float32)


def tsne_settings(points: int, seed: int, threads: int) -> dict:
    # perplexity 30 (openTSNE's default) needs more than 3 * 30 points; small samples get what they can hold. From
    # openTSNE's PCA start, 100 + 200 iterations (its default is 250 + 500) settle a map of a thousand points (one
    # of the shipped en-de model's heads: KL divergence 1.08 after 200, 1.07 after 250)
    return {"perplexity": float(min(30.0, max(2.0, (points - 1) / 3.5))), "random_state": seed, "n_jobs": threads,
            "initialization": "pca", "early_exaggeration_iter": 100, "n_iter": 200,
            "negative_gradient_method": "bh", "verbose": False}


def project(points: np.ndarray, projection: str, seed: int = 0, threads: int = 1) -> np.ndarray:
    """(n, 2) float32 coordinates of `points` (n, hs)."""
    if projection == "pca":
        mean, components = pca(points)
        return ((points - mean) @ components.T).astype(np.float32)
    from openTSNE import TSNE

    return np.asarray(TSNE(**tsne_settings(len(points), seed, threads)).fit(points), np.float32)


@dataclass
class HeadMap:
    """One head's map: the first `queries` points are its sampled queries, the rest its sampled keys."""

    coordinates: np.ndarray  # (queries + keys, 2)
    queries: int
    norm: Normalisation
    pca_mean: np.ndarray  # (hs,)
    pca_components: np.ndarray  # (2, hs)


def head_map(queries: np.ndarray, keys: np.ndarray, projection: str, seed: int = 0, threads: int = 1) -> HeadMap:
    norm = normalisation(queries, keys)
    points = np.concatenate([norm.queries(queries), norm.keys(keys)])
    mean, components = pca(points)
    if projection == "pca":
        coordinates = ((points - mean) @ components.T).astype(np.float32)
    else:
        coordinates = project(points, projection, seed, threads)
    return HeadMap(coordinates, len(queries), norm, mean.astype(np.float32), components)


def place(head: HeadMap, points: np.ndarray, part: str, projection: str, reference: np.ndarray | None = None,
          seed: int = 0) -> np.ndarray:
    """New queries or keys (`part`) of this head, (m, hs), as (m, 2) coordinates on its map. t-SNE needs the map's
    own normalised points (`reference`, the (queries + keys, hs) it was made from)."""
    moved = head.norm.queries(points) if part == "queries" else head.norm.keys(points)
    if projection == "pca":
        return ((moved - head.pca_mean) @ head.pca_components.T).astype(np.float32)
    from openTSNE import TSNEEmbedding
    from openTSNE.affinity import PerplexityBasedNN

    settings = tsne_settings(len(reference), seed, 1)
    affinities = PerplexityBasedNN(reference, perplexity=settings["perplexity"], random_state=seed, n_jobs=1,
                                   method="exact" if len(reference) < 1000 else "annoy")
    embedding = TSNEEmbedding(head.coordinates.astype(np.float64), affinities, random_state=seed)
    return np.asarray(embedding.transform(moved), np.float32)


def reference_points(head: HeadMap, queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    return np.concatenate([head.norm.queries(queries), head.norm.keys(keys)])


def save_maps(path, maps: list[list[HeadMap]], projection: str) -> None:
    """One kind's maps, [layer][head], into one .npz (no pickles: every entry is a plain array)."""
    stack = lambda field: np.stack([np.stack([getattr(h, field) for h in row]) for row in maps])  # noqa: E731
    np.savez(path, coordinates=stack("coordinates"), queries=np.array(maps[0][0].queries),
             key_shift=np.stack([np.stack([h.norm.key_shift for h in row]) for row in maps]),
             scale=np.array([[h.norm.scale for h in row] for row in maps], np.float32),
             pca_mean=stack("pca_mean"), pca_components=stack("pca_components"), projection=np.array(projection))


def load_maps(path) -> tuple[list[list[HeadMap]], str]:
    with np.load(path, allow_pickle=False) as stored:
        values = {name: stored[name] for name in stored.files}
    layers, heads = values["scale"].shape
    maps = [[HeadMap(values["coordinates"][layer, head], int(values["queries"]),
                     Normalisation(values["key_shift"][layer, head], float(values["scale"][layer, head])),
                     values["pca_mean"][layer, head], values["pca_components"][layer, head])
             for head in range(heads)] for layer in range(layers)]
    return maps, str(values["projection"])
