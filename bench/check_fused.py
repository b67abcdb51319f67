"""Whether decoding every decoder layer's step in one kernel call (core/fused_step.py) changes any translation: each
shipped checkpoint translates every val sentence alone, as the app does, with its recorded decoding settings (beam
search) and greedily, on four paths: the fused step; the Python step on the same float16 copies; the Python step
on the float32 weights through F.linear (no kernel at all, the reference); and the opt-in int8 decoding
(`model.int8_decoding`, the fused step on int8 copies of the decoder's projections), which does change numbers.
Prints JSON: per checkpoint and strategy, how many sentences the fused step translates differently from the Python
steps, how many the int8 path translates differently from the fused step, each path's BLEU (sacrebleu) against the
references, and each path's seconds.

    python bench/check_fused.py [--checkpoints checkpoints/en-de checkpoints/de-en] [--split val] [--limit N]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import sacrebleu
import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer import Translator  # noqa: E402
from transformer.core.fused_step import why_not_fused  # noqa: E402
from transformer.core.half_linear import KERNEL  # noqa: E402
from transformer.corpus.data import default_data_dir, read_parallel_or_exit  # noqa: E402

# name: (fused step, float16 copies, int8 copies)
PATHS = {"fused": (True, True, False), "python step": (False, True, False), "float32 F.linear": (False, False, False),
         "int8 (opt-in)": (True, True, True)}


def translations(translator: Translator, sentences: list[str], path: str, strategy: str, settings: dict,
                 label: str) -> tuple[list[str], float]:
    fused, half, int8 = PATHS[path]
    translator.model.fused_decoding = fused
    translator.model.use_half_weights(half)
    translator.model.int8_decoding = int8
    started = time.perf_counter()
    texts = [translator.translate(s, strategy=strategy, **settings).text
             for s in tqdm(sentences, desc=f"{label} {path}", leave=False)]
    return texts, round(time.perf_counter() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoints", nargs="+", default=[str(ROOT / "checkpoints" / "en-de"), str(ROOT / "checkpoints" / "de-en")]
    )
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="multi30k folder (default: ../shared/data/multi30k)"
    )
    parser.add_argument("--split", default="val")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the app decodes)")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    data_dir = args.data_dir or default_data_dir()
    if data_dir is None:
        parser.error("no multi30k folder found: pass --data-dir")
    KERNEL.wait()
    report = {"kernel": KERNEL.status, "split": args.split, "checkpoints": {}}
    for checkpoint in args.checkpoints:
        translator = Translator.from_pretrained(checkpoint)
        languages = translator.languages
        corpus = read_parallel_or_exit(data_dir, args.split, languages["src"], languages["tgt"])
        sentences, references = corpus.source[: args.limit], corpus.target[: args.limit]
        why = why_not_fused(translator.model, 4)
        if why is not None:
            parser.error(f"{checkpoint}: the kernel would not run ({why})")
        translator.model.int8_decoding = True
        why_not_int8 = why_not_fused(translator.model, 4)  # then the path would be the Python float32 one: left out
        paths = [path for path in PATHS if why_not_int8 is None or not PATHS[path][2]]
        results = {} if why_not_int8 is None else {"int8 (opt-in)": f"left out: {why_not_int8}"}
        for strategy, settings in (translator.recorded_decoding(), ("greedy", {})):
            label = f"{Path(checkpoint).name} {strategy}"
            texts, seconds = {}, {}
            for path in paths:
                texts[path], seconds[path] = translations(translator, sentences, path, strategy, settings, label)
            fused = texts["fused"]
            bleu = {path: round(sacrebleu.corpus_bleu(texts[path], [references]).score, 2) for path in paths}
            results[strategy] = {"settings": settings, "sentences": len(sentences), "seconds": seconds, "bleu": bleu}
            for other in paths[1:]:
                different = [i for i, (a, b) in enumerate(zip(texts[other], fused)) if a != b]
                key = other.split(" (")[0].replace(" ", "_")
                results[strategy][f"different_from_{key}"] = len(different)
                results[strategy][f"first_different_from_{key}"] = [
                    {other: texts[other][i], "fused": fused[i]} for i in different[:5]]
        report["checkpoints"][Path(checkpoint).name] = results
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
