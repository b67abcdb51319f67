"""How well the page's language check (explorer/language.py) tells English from German, on Tatoeba's test pairs:
for each side, how often the English -> German model would offer German -> English (and the reverse), which is
right for the other language's sentences and a false alarm for its own; by sentence length in words, with the
time one check takes. Prints JSON.

    python bench/bench_language.py [--data ../shared/data/tatoeba] [--limit 5000]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer.language import MIN_PROBABILITY, detect, identifier  # noqa: E402

LANGUAGES = ("de", "en")  # what the shipped models translate from


def rates(sentences: list[str], own: str) -> dict:
    """Share of `sentences` (in `own`) that a model translating from the other language would flag (right), and
    that a model translating from `own` would flag (a false alarm), overall and by length."""
    buckets: dict[str, list[int]] = {}
    for sentence in sentences:
        language, probability = detect(sentence, LANGUAGES)
        flagged_other = language == own and probability >= MIN_PROBABILITY
        false_alarm = language != own and probability >= MIN_PROBABILITY
        words = len(sentence.split())
        bucket = "1-2 words" if words <= 2 else "3-4 words" if words <= 4 else "5+ words"
        for key in ("all", bucket):
            counts = buckets.setdefault(key, [0, 0, 0])
            counts[0] += 1
            counts[1] += flagged_other
            counts[2] += false_alarm
    return {key: {"sentences": n, "offered_where_right": round(right / n, 4), "false_alarms": round(wrong / n, 4)}
            for key, (n, right, wrong) in sorted(buckets.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "tatoeba",
                        help="a folder with test.en and test.de (default: ../shared/data/tatoeba)")
    parser.add_argument("--limit", type=int, default=5000, help="sentences per side (default 5000)")
    args = parser.parse_args()
    sides = {}
    for language in LANGUAGES:
        path = args.data / f"test.{language}"
        if not path.is_file():
            parser.error(f"{path}: no such file")
        sides[language] = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        sides[language] = sides[language][: args.limit]
    started = time.perf_counter()
    identifier(LANGUAGES)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    report = {language: rates(sentences, language) for language, sentences in sides.items()}
    checks = sum(len(s) for s in sides.values())
    report["threshold"] = MIN_PROBABILITY
    report["load_s"] = round(load_s, 2)
    report["microseconds_per_check"] = round((time.perf_counter() - started) / checks * 1e6, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
