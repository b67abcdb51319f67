"""Building an atlas: corpus -> teacher-forced batches (an engine) -> vectors and records -> indexes -> maps.

Everything is written into a temporary folder beside OUT, renamed to OUT only once atlas.json is complete: a build
that fails or is interrupted leaves no atlas (and removes its temporary folder where it can).
"""
from __future__ import annotations

import datetime
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..checkpoint import SHIPPED_ROOT, WEIGHTS_FILE, checkpoint_folder, load_checkpoint
from ..command_line import write_json_atomically
from ..core.head_ref import HeadRef, shown
from ..core.probes import ATTENTION_KINDS, SOURCE, TARGET
from ..path_checks import folder_problem
from ..paths import portable_path
from .corpus import SPLIT, batches, read_corpus, sample_rows, tokenize
from .engines import ENGINES, run_engine
from .index import build_index, tune, write_index
from .maps import DEFAULT_SAMPLE, PROJECTIONS, head_map, save_maps
from .store import (
    FORMAT,
    MANIFEST,
    SIDES,
    AtlasError,
    file_hash,
    index_file,
    map_file,
    require,
    sample_file,
    stack,
    vectors_file,
)
from .writer import AtlasWriter


@dataclass
class BuildSettings:
    sentences: int | None = None  # the first N pairs; None: all
    engine: str = "local"  # one of engines.ENGINES
    batch_size: int = 32  # sentence pairs per teacher-forced batch
    threads: int | None = None  # torch threads per engine worker (None: torch's choice)
    # tokens per side whose queries and keys are kept for the maps; None: maps.DEFAULT_SAMPLE for the projection
    sample: int | None = None
    projection: str = "tsne"  # one of maps.PROJECTIONS
    recall: float = 0.95  # recall@10 against exact search that the index's nprobe is tuned to reach
    seed: int = 0  # the sample, the index's training set and t-SNE's start
    # the layers (0-based) whose vectors are stored and indexed, on each side that has them (the source side has the
    # encoder's layers, the target side the decoder's); None: every layer of each side
    layers: tuple[int, ...] | None = None
    # keep each head's sampled queries and keys: a t-SNE map needs them to place new points, a PCA map does not
    # (its stored linear map does), so a PCA atlas may leave them out to save space (a shipped atlas does)
    keep_samples: bool = True
    # keep the vectors' .npy files beside their indexes; without them (--index-only) the index's float16 copy is
    # the only one, read back with FAISS's reconstruct: half the size, for shipped atlases
    keep_vectors: bool = True

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise AtlasError(f"--engine must be one of {list(ENGINES)}, got {self.engine!r}")
        if self.projection not in PROJECTIONS:
            raise AtlasError(f"--projection must be one of {list(PROJECTIONS)}, got {self.projection!r}")
        if not self.keep_samples and self.projection != "pca":
            raise AtlasError("--drop-samples needs --projection pca: a t-SNE map places new points among its samples")
        if self.sample is None:
            self.sample = DEFAULT_SAMPLE[self.projection]


def checkpoint_identity(checkpoint) -> dict:
    """Which checkpoint an atlas belongs to: its folder (a shipped one by name) and the hash of its weights."""
    folder = checkpoint_folder(checkpoint).resolve()
    shipped = folder.parent == SHIPPED_ROOT.resolve()
    return {"name": folder.name, "path": folder.name if shipped else str(folder), "shipped": shipped,
            "weights_sha256": file_hash(folder / WEIGHTS_FILE)}


def indexed_layers(settings: BuildSettings, config) -> dict[str, tuple[int, ...]]:
    """side -> the 0-based layers stored and indexed there. A layer that only the deeper stack has (layer 5 of a 6
    encoder and 2 decoder layer model) is indexed on that stack's side only; one that neither has is refused."""
    counts = {side: stack(config, side).layers for side in SIDES}
    if settings.layers is None:
        return {side: tuple(range(count)) for side, count in counts.items()}
    layers = tuple(sorted(set(settings.layers)))
    deepest = max(counts.values())
    if not layers or not all(0 <= layer < deepest for layer in layers):
        each = "" if len(set(counts.values())) == 1 else (
            f" (the source side has the encoder's {counts[SOURCE]}, the target side the decoder's {counts[TARGET]}; "
            "a layer only one side has is indexed on that side only)")
        raise AtlasError(f"--layers must name layers in [1, {deepest}]{each}, got {[shown(layer) for layer in layers]}")
    return {side: tuple(layer for layer in layers if layer < count) for side, count in counts.items()}


def needed_bytes(corpus, config, sample: int, layers: dict[str, tuple[int, ...]]) -> int:
    """What the atlas will take on disk, roughly: the vectors and their index at each stored layer, the records and
    the samples (each kind's heads together are d_model wide, in any stack)."""
    stored = sum(corpus.tokens(side) * len(layers[side]) for side in SIDES)
    vectors, index = stored * config.d_model * 2, stored * (config.d_model * 2 + 8)
    samples = sum(2 * sample * stack(config, kind).layers * config.d_model * 2 for kind in ATTENTION_KINDS)
    return vectors + index + samples + sum(corpus.tokens(side) for side in SIDES) * 40


def check_disk(folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed * 1.1:
        raise AtlasError(f"{folder}: too little disk: the atlas needs about {needed / 1e9:.2f} GB, "
                         f"{free / 1e9:.2f} GB are free; free some space or build fewer --sentences")


def check_out(out: Path) -> Path:
    if out.exists():
        raise AtlasError(f"{out}: already exists; remove it or choose another folder (an atlas is never overwritten)")
    problem = folder_problem(out.parent)
    if problem:
        raise AtlasError(f"{out}: its folder {out.parent} {problem}")
    return out


def library_versions(engine: str) -> dict:
    """The versions of what computed the atlas (read from the installed distributions, without importing them)."""
    from importlib.metadata import PackageNotFoundError, version

    names = ["attention-explorer", "torch", "numpy", "pyarrow", "faiss-cpu", "openTSNE"] + (["ray"] if engine == "ray"
                                                                                           else [])
    versions = {}
    for name in names:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:  # run from a clone without installing it
            versions[name] = "not installed"
    return versions


def build_indexes(folder: Path, layers: dict[str, tuple[int, ...]], settings: BuildSettings, progress) -> dict:
    stats = {}
    for side in SIDES:
        for layer in layers[side]:
            vectors = np.load(folder / vectors_file(side, layer), mmap_mode="r")
            index = build_index(vectors, settings.seed)
            stats[f"{side}-layer-{shown(layer)}"] = tune(index, vectors, settings.recall)
            write_index(index, folder / index_file(side, layer))
            if not settings.keep_vectors:
                del vectors
                (folder / vectors_file(side, layer)).unlink()
            progress("indexing", 1)
    return stats


def build_maps(folder: Path, config, settings: BuildSettings, progress) -> None:
    threads = settings.threads or os.cpu_count() or 1  # t-SNE's neighbours and gradients on every core by default
    for kind in ATTENTION_KINDS:
        queries = np.load(folder / sample_file(kind, "queries"), mmap_mode="r")
        keys = np.load(folder / sample_file(kind, "keys"), mmap_mode="r")
        maps, shape = [], stack(config, kind)  # the kind's own stack: its layers, heads and head size
        for layer in range(shape.layers):
            maps.append([])
            for head in range(shape.heads):
                maps[-1].append(head_map(queries[layer, head], keys[layer, head], settings.projection,
                                         settings.seed, threads))
                progress("maps", 1, f"{kind} {HeadRef(kind, layer, head).label}")
        save_maps(folder / map_file(kind), maps, settings.projection)
        if not settings.keep_samples:
            for part in ("queries", "keys"):
                (folder / sample_file(kind, part)).unlink()


def build_atlas(checkpoint, corpus_dir, out, settings: BuildSettings, progress=lambda stage, done, what=None: None,
                command: str = "") -> dict:
    """Builds the atlas of `checkpoint` over CORPUS_DIR/train.* into `out`; returns its atlas.json. `progress(stage,
    n, what=None)` is told of each step done: ("extracting", sentences), ("indexing", 1) per index, ("maps", 1, the
    head's kind, layer and head) per head."""
    out = check_out(Path(out))
    for module in ("pyarrow", "faiss", "openTSNE" if settings.projection == "tsne" else "numpy"):
        require(module)
    model, tokenizer, config = load_checkpoint(checkpoint)
    languages = config.get("languages", {"src": "en", "tgt": "de"})
    source, target = read_corpus(corpus_dir, languages, settings.sentences)
    corpus = tokenize(tokenizer, source, target, model.config.max_len)
    layers = indexed_layers(settings, model.config)
    check_disk(out.parent, needed_bytes(corpus, model.config, settings.sample, layers))
    temporary = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".partial"))
    try:
        started = time.perf_counter()
        sampled = sample_rows(corpus, settings.sample, settings.seed)
        writer = AtlasWriter(temporary, corpus, model.config, sampled, layers)
        run_engine(settings, checkpoint_folder(checkpoint), model, corpus, batches(corpus, settings.batch_size),
                   sampled, lambda out: progress("extracting", writer.add(out)))
        counts = writer.finish(tokenizer)
        index = build_indexes(temporary, layers, settings, progress)
        indexed = time.perf_counter()
        build_maps(temporary, model.config, settings, progress)
        manifest = {
            "format": FORMAT, "checkpoint": checkpoint_identity(checkpoint), "model": model.config.to_dict(),
            "languages": languages,
            "corpus": {"folder": portable_path(corpus_dir), "split": SPLIT, "sentences": len(corpus)},
            "counts": counts, "settings": asdict(settings),
            "indexed_layers": {side: list(layers[side]) for side in SIDES},
            "versions": library_versions(settings.engine),
            "index": {"type": "faiss IndexIVFScalarQuantizer (QT_fp16), L2", "distance": "euclidean",
                      "per_layer": index},
            "maps": {"projection": settings.projection, "method": "AttentionViz: keys moved to the queries' "
                     "centroid, queries and keys scaled to equal mean norm, projected together"},
            "seconds": {"extraction_and_index": round(indexed - started, 2),
                        "maps": round(time.perf_counter() - indexed, 2)},
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": command,
        }
        write_json_atomically(temporary / MANIFEST, manifest)
        os.rename(temporary, out)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return manifest
