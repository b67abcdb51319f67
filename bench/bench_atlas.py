"""What building and asking a corpus atlas costs: sentence pairs per minute for extraction and indexing (the maps'
projection timed apart), peak memory, the index's recall@10 against exact search, and the p95 latency of a
neighbour query (the index search alone, and the whole question: translate, teacher-force, search). Prints JSON.

    python bench/bench_atlas.py [--sentences 5000] [--engine local|ray|both] [--projection pca|tsne]

Targets (issue 42): >= 2,000 pairs/min, <= 4 GB peak at 200,000 pairs, Ray within 1.5x of local, recall@10 >= 0.95,
query p95 <= 50 ms.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def build(args, engine: str, out: Path) -> dict:
    from transformer.atlas import BuildSettings, build_atlas

    settings = BuildSettings(sentences=args.sentences, engine=engine, batch_size=args.batch_size,
                             threads=args.threads, sample=args.sample, projection=args.projection)
    started = time.perf_counter()
    manifest = build_atlas(args.checkpoint, args.corpus, out, settings)
    total = time.perf_counter() - started
    seconds = manifest["seconds"]
    return {"engine": engine, "pairs": manifest["counts"]["sentences"], "tokens": manifest["counts"]["tokens"],
            "extraction_and_index_s": seconds["extraction_and_index"], "maps_s": seconds["maps"],
            "total_s": round(total, 2),
            "pairs_per_minute": round(manifest["counts"]["sentences"] / seconds["extraction_and_index"] * 60, 1),
            "tuned_recall_at_10": manifest["index"]["per_layer"]}


def recall_and_latency(folder: Path, args) -> dict:
    from transformer.atlas import Atlas
    from transformer.atlas.index import exact_search, recall_at, search
    from transformer.atlas.query import neighbours, sentence_vectors
    from transformer.checkpoint import load_checkpoint

    atlas = Atlas.open(folder)
    rng = np.random.default_rng(7)
    recall, search_ms = {}, []
    for side in ("source", "target"):
        for layer in atlas.indexed[side]:
            vectors = atlas.vectors(side, layer)
            rows = rng.choice(len(vectors), size=min(args.queries, len(vectors)), replace=False)
            queries = np.asarray(vectors[np.sort(rows)], np.float32)
            _, exact = exact_search(vectors, queries, 10)
            index = atlas.index(side, layer)
            for query in queries:
                started = time.perf_counter()
                search(index, query[None], 10)
                search_ms.append((time.perf_counter() - started) * 1000)
            recall[f"{side}-layer-{layer + 1}"] = round(recall_at(search(index, queries, 10)[1], exact), 4)
    model, tokenizer, _ = load_checkpoint(atlas.check_checkpoint(atlas.checkpoint["path"]))
    sentences = atlas.sentences.column("source").to_pylist()
    question_ms = []
    for sentence in rng.choice(sentences, size=min(50, len(sentences)), replace=False):
        started = time.perf_counter()
        vectors = sentence_vectors(model, tokenizer, str(sentence))
        neighbours(atlas, vectors, 0, atlas.indexed["source"][-1], "source", 10)
        question_ms.append((time.perf_counter() - started) * 1000)
    return {"recall_at_10_vs_exact": recall, "recall_queries_per_index": args.queries,
            "search_p95_ms": round(p95(search_ms), 3), "search_median_ms": round(statistics.median(search_ms), 3),
            "question_p95_ms": round(p95(question_ms), 1),
            "question_median_ms": round(statistics.median(question_ms), 1)}


def tab_latency(folder: Path, sentence: str = "The dog is sleeping in front of the house.") -> dict:
    """What the Atlas tab waits for, on an atlas (the shipped one): reading every head's map of one kind the first
    time, placing the sentence on every map of every kind, and a token's 10 neighbours once the atlas is open."""
    from transformer.atlas import Atlas
    from transformer.atlas.query import head_points, neighbours, placed, sentence_vectors
    from transformer.checkpoint import load_checkpoint

    started = time.perf_counter()
    atlas = Atlas.open(folder)
    model, tokenizer, _ = load_checkpoint(atlas.check_checkpoint(atlas.checkpoint["path"]))
    for layer in range(atlas.stack("cross").layers):
        for head in range(atlas.stack("cross").heads):
            head_points(atlas, "cross", layer, head)
    first_maps = time.perf_counter() - started
    started = time.perf_counter()
    vectors = sentence_vectors(model, tokenizer, sentence)
    for kind in ("encoder_self", "decoder_self", "cross"):
        for layer in range(atlas.stack(kind).layers):
            for head in range(atlas.stack(kind).heads):
                placed(atlas, vectors, kind, layer, head)
    place_all = time.perf_counter() - started
    neighbours(atlas, vectors, 0, atlas.indexed["source"][-1], "source", 10)  # the index and records read once
    # a click as the tab answers it: the sentence's vectors through the app's service, made on the first question
    # about the sentence (here a new one: the maps' sentence is another) and kept for the next
    from explorer.atlas_service import sentence_vectors as served_vectors
    from transformer import Translator

    served = SimpleNamespace(translator=Translator(model, tokenizer))
    clicked = sentence.replace("dog", "cat")
    timings = []
    for token in range(len(vectors.pieces["source"])):
        started = time.perf_counter()
        last = atlas.indexed["source"][-1]
        neighbours(atlas, served_vectors(served, clicked), token, last, "source", 10)
        timings.append((time.perf_counter() - started) * 1000)
    return {"atlas": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else folder.name,
            "first_maps_of_a_kind_s": round(first_maps, 3), "place_sentence_on_every_map_s": round(place_all, 3),
            "token_to_neighbours_first_click_ms": round(timings[0], 1),
            "token_to_neighbours_later_median_ms": round(statistics.median(timings[1:]), 1),
            "token_to_neighbours_later_p95_ms": round(p95(timings[1:]), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "en-de"))
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared" / "data" / "tatoeba"))
    parser.add_argument("--sentences", type=int, default=5000)
    parser.add_argument("--engine", choices=("local", "ray", "both"), default="local")
    parser.add_argument("--projection", choices=("pca", "tsne"), default="pca")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--sample", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200, help="queries per index for recall and latency")
    parser.add_argument("--tab-atlas", default=str(ROOT / "checkpoints" / "en-de" / "atlas"),
                        help="the atlas whose Atlas-tab latencies are timed (default: the shipped En→De one)")
    parser.add_argument("--only-tab", action="store_true", help="time the Atlas tab's latencies only, no build")
    args = parser.parse_args()
    engines = ("local", "ray") if args.engine == "both" else (args.engine,)
    if args.only_tab:
        print(json.dumps({"command": "python bench/bench_atlas.py " + " ".join(sys.argv[1:]),
                          "date": time.strftime("%Y-%m-%d", time.gmtime()), **tab_latency(Path(args.tab_atlas))},
                         indent=1))
        return
    report = {"command": "python bench/bench_atlas.py " + " ".join(sys.argv[1:]), "cpu": platform.processor(),
              "machine": platform.machine(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "builds": []}
    with tempfile.TemporaryDirectory(prefix="bench_atlas_") as scratch:
        for engine in engines:
            report["builds"].append(build(args, engine, Path(scratch) / engine))
        report.update(recall_and_latency(Path(scratch) / engines[0], args))
    report["tab"] = tab_latency(Path(args.tab_atlas))
    if len(engines) == 2:
        local, ray = (b["extraction_and_index_s"] for b in report["builds"])
        report["ray_over_local"] = round(ray / local, 2)
    # ru_maxrss is in KiB on Linux; Ray's workers are other processes and are not in it
    report["peak_memory_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
