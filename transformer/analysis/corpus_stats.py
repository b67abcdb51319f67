"""Head statistics over a whole split, so the app can show what each head does in general, not only in the
sentence on screen: every sentence of the split is translated greedily with attention captured, and
`head_stats.aggregate_head_stats` averages each statistic per head.

    python -m transformer.analysis.corpus_stats --checkpoint checkpoints/en-de      # writes head_stats.json

In head_stats.json layers and heads are numbered from 1, as the app shows them.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from ..checkpoint import CheckpointError
from ..command_line import CommandParser, answered, check_writable, command_text, number_type, write_json_atomically
from ..core.head_ref import HeadRef
from ..core.probes import ATTENTION_KINDS
from ..corpus.data import default_data_dir, read_parallel_or_exit
from ..corpus.parallel import CorpusError
from ..decoding.translator import Translator
from .cli import add_hardware, check_data_dir, use_threads
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
    parser = CommandParser(prog="python -m transformer.analysis.corpus_stats", description=__doc__)
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder; head_stats.json is written there")
    parser.add_argument("--data-dir", default=default_data_dir(), help="folder of {split}.{lang} files")
    parser.add_argument("--split", default="val", help="split to average over (default: val)")
    parser.add_argument("--limit", type=number_type("--limit", int, 1), default=None, help="only the first N sentences")
    parser.add_argument("--batch-size", type=number_type("--batch-size", int, 1), default=32,
                        help="sentences per greedy decoding batch (default: 32)")
    add_hardware(parser)
    args = parser.parse_args(argv)
    check_data_dir(parser, args)
    use_threads(args)
    with answered(parser, CheckpointError, CorpusError):
        translator = Translator.from_pretrained(args.checkpoint, device=args.device)
        path = check_writable(Path(translator.source) / STATS_FILE)
    languages = translator.languages
    sentences = read_parallel_or_exit(args.data_dir, args.split, languages["src"], languages["tgt"]).source[
        : args.limit
    ]
    started = time.perf_counter()
    with tqdm(total=len(sentences), unit="sentence", desc=f"head statistics over {args.split}") as bar:
        per_kind = split_head_stats(translator, sentences, args.batch_size, progress=bar.update)
    command = command_text("transformer.analysis.corpus_stats", argv)
    document = stats_document(per_kind, args.split, len(sentences), command, (time.perf_counter() - started) / 60)
    write_json_atomically(path, document, indent=1)
    print(f"wrote {path} ({len(document['heads'])} heads over {len(sentences)} sentences)")


if __name__ == "__main__":
    main()
