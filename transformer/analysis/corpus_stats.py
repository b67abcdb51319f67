"""Head statistics over a whole split, so the app can show what each head does in general, not only in the
sentence on screen: every sentence of the split is translated greedily with attention captured, and
`head_stats.aggregate_head_stats` averages each statistic per head.

    python -m transformer.analysis.corpus_stats --checkpoint checkpoints/en-de      # writes head_stats.json

In head_stats.json layers and heads are numbered from 1, as the app shows them.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from ..core.probes import ATTENTION_KINDS
from ..decoding.translator import Translator
from ..core.head_ref import HeadRef
from ..corpus.data import default_data_dir, read_parallel_or_exit
from .head_stats import aggregate_head_stats, head_stats

STATS_FILE = "head_stats.json"


def split_head_stats(translator: Translator, sentences: list[str], batch_size: int = 32, progress=None) -> dict:
    """kind -> per-head statistics averaged over `sentences` (greedy decoding, attention captured)."""
    per_kind = {kind: [] for kind in ATTENTION_KINDS}
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        for translation in translator.translate_batch(batch, capture=True):
            for kind in ATTENTION_KINDS:
                per_kind[kind].append(head_stats(translation.recorded[kind]))
        if progress:
            progress(len(batch))
    return {kind: aggregate_head_stats(per_sentence) for kind, per_sentence in per_kind.items()}


def stats_document(per_kind: dict, split: str, sentences: int, command: str, minutes: float) -> dict:
    heads = [{**asdict(s), **HeadRef(s.kind, s.layer, s.head).numbered(), "role": s.role}
             for kind in ATTENTION_KINDS for s in per_kind[kind]]
    return {"split": split, "sentences": sentences, "decoding": "greedy", "numbering": "layers and heads from 1",
            "heads": heads, "command": command, "minutes": round(minutes, 2)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m transformer.analysis.corpus_stats", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder; head_stats.json is written there")
    parser.add_argument("--data-dir", default=default_data_dir(), help="folder of {split}.{lang} files")
    parser.add_argument("--split", default="val", help="split to average over (default: val)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    translator = Translator.from_pretrained(args.checkpoint)
    languages = translator.languages
    sentences = read_parallel_or_exit(args.data_dir, args.split, languages["src"], languages["tgt"]).source[: args.limit]
    started = time.perf_counter()
    with tqdm(total=len(sentences), unit="sentence", desc=f"head statistics over {args.split}") as bar:
        per_kind = split_head_stats(translator, sentences, progress=bar.update)
    command = "python -m transformer.analysis.corpus_stats " + shlex.join(argv if argv is not None else sys.argv[1:])
    document = stats_document(per_kind, args.split, len(sentences), command, (time.perf_counter() - started) / 60)
    path = Path(translator.source) / STATS_FILE
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(document['heads'])} heads over {len(sentences)} sentences)")


if __name__ == "__main__":
    main()
