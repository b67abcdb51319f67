"""Translate a split and score it with sacreBLEU (cased, 13a tokenisation, detokenised output).

    python -m transformer.evaluate --checkpoint checkpoints/en-de --split test_2016_flickr
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import sacrebleu

from .checkpoint import METRICS_FILE
from .data import default_data_dir, read_parallel
from .translator import Translator


def translate_corpus(translator: Translator, sentences: list[str], strategy: str = "greedy", beam_size: int = 4,
                     length_penalty: float = 0.6, batch_size: int = 64, progress=None) -> list[str]:
    """Translates in batches of similar length (less padding), returning outputs in input order."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    outputs = [""] * len(sentences)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        results = translator.translate_batch([sentences[i] for i in batch], strategy=strategy,
                                             beam_size=beam_size, length_penalty=length_penalty)
        for index, result in zip(batch, results):
            outputs[index] = result.text
        if progress is not None:
            progress(len(batch))
    return outputs


def score(hypotheses: list[str], references: list[str]) -> dict:
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu_score, chrf_score = bleu.corpus_score(hypotheses, [references]), chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": round(bleu_score.score, 2), "chrf": round(chrf_score.score, 2),
        "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature()),
        "sentences": len(hypotheses),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m transformer.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder (config.json, model.safetensors, spm.model)")
    parser.add_argument("--split", default="val", help="split name: reads {split}.{src} and {split}.{tgt} (default: val)")
    parser.add_argument("--data-dir", default=default_data_dir(), help="folder of {split}.{lang} files (default: ../shared/data/multi30k)")
    parser.add_argument("--strategy", choices=("greedy", "beam"), default=None,
                        help="decoding strategy (default: the one recorded in the checkpoint's metrics.json, else beam)")
    parser.add_argument("--beam-size", type=int, default=None, help="beam size (default: from metrics.json, else 4)")
    parser.add_argument("--length-penalty", type=float, default=None, help="GNMT length penalty alpha (default: from metrics.json, else 0.6)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--out", help="write the translations here, one per line")
    parser.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    parser.add_argument("--update-metrics", action="store_true",
                        help="record these scores under scores[split] in the checkpoint's metrics.json")
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist")

    translator = Translator.from_pretrained(args.checkpoint, device=args.device)
    recorded = (translator.metrics or {}).get("decoding", {})
    strategy = args.strategy or recorded.get("strategy", "beam")
    beam_size = args.beam_size or recorded.get("beam_size", 4)
    alpha = args.length_penalty if args.length_penalty is not None else recorded.get("length_penalty", 0.6)
    languages = translator.config.get("languages", {"src": "en", "tgt": "de"})
    corpus = read_parallel(args.data_dir, args.split, languages["src"], languages["tgt"])
    started = time.perf_counter()
    hypotheses = translate_corpus(translator, corpus.source, strategy, beam_size, alpha, args.batch_size)
    elapsed = time.perf_counter() - started
    if args.out:
        Path(args.out).write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    result = {"split": args.split, "strategy": strategy, "beam_size": beam_size if strategy == "beam" else 1,
              "length_penalty": alpha, **score(hypotheses, corpus.target), "seconds": round(elapsed, 1)}
    if args.update_metrics:
        metrics_file = Path(args.checkpoint) / METRICS_FILE
        metrics = translator.metrics or {}
        metrics.setdefault("scores", {})[args.split] = {k: result[k] for k in ("bleu", "chrf", "bleu_signature",
                                                                              "chrf_signature", "sentences")}
        metrics["decoding"] = {"strategy": strategy, "beam_size": result["beam_size"], "length_penalty": alpha}
        metrics_file.write_text(json.dumps(metrics, indent=2) + "\n")
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.split}: BLEU {result['bleu']}  chrF {result['chrf']}  ({len(hypotheses)} sentences, "
              f"{strategy}{' ' + str(beam_size) if strategy == 'beam' else ''}, {elapsed:.1f} s)")
        print(f"BLEU signature: {result['bleu_signature']}")
        print(f"chrF signature: {result['chrf_signature']}")


if __name__ == "__main__":
    sys.exit(main())
