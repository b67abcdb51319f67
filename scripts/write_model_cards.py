"""Writes the model cards into docs/model-cards.md, each from its checkpoint's metrics.json (by
transformer.training.model_card), so the page states what was measured and nothing older.

The page names each card's checkpoint in its markers (`<!-- model card: checkpoints/en-de: begin -->` ... `end -->`);
what lies between a pair is rewritten, the text around them (the page's introduction, each model's story) is kept.

    python scripts/write_model_cards.py            # print the cards
    python scripts/write_model_cards.py --write    # put them into docs/model-cards.md, between their markers
    python scripts/write_model_cards.py --check    # exit 1 when the page's cards differ from the checkpoints'
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from transformer.checkpoint import read_metrics
from transformer.training.model_card import model_card

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "model-cards.md"
COMMAND = "python scripts/write_model_cards.py --write"
MARKERS = re.compile(r"<!-- model card: (?P<checkpoint>[\w./-]+): begin -->\n(?P<card>.*?)"
                     r"<!-- model card: (?P=checkpoint): end -->", re.S)


def shipped_checkpoints(root: Path = ROOT) -> list[str]:
    """Every shipped checkpoint that has a card to write, as a path from the repository root."""
    return [f"checkpoints/{path.name}" for path in sorted((root / "checkpoints").iterdir())
            if (path / "metrics.json").is_file()]


def card_of(checkpoint: str, root: Path = ROOT) -> str:
    """The card of one checkpoint as the page holds it: no heading (the page's section names the checkpoint)."""
    metrics = read_metrics(root / checkpoint)
    if metrics is None:
        raise ValueError(f"{checkpoint} has no metrics.json")
    return model_card(metrics, checkpoint, title=False) + features_table(root / checkpoint)


def features_table(folder: Path) -> str:
    """The checkpoint's shipped sparse dictionaries (docs/features.md) with their metrics, from each one's
    config.json; nothing where it has none."""
    configs = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("features/*/config.json"))]
    if not configs:
        return ""
    lines = ["", "", "Sparse dictionaries ([Dictionary features](features.md)), measured on held-out sentences:", "",
             "| point | n | k | sentences | FVU | dead latents | greedy identical, point replaced | val BLEU change |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| `{c['point']}` | {c['n']:,} | {c['k']} | {c['sentences']:,} | {c['metrics']['fvu']:.3f} | "
              f"{c['metrics']['dead_latents']} | {100 * c['metrics']['greedy_identical']:.1f} % | "
              f"{c['metrics']['bleu_change']:+.2f} |" for c in configs]
    return "\n".join(lines)


def cards_in(text: str) -> dict[str, str]:
    """Checkpoint -> the card between its markers in a page's text."""
    return {match["checkpoint"]: match["card"].strip("\n") for match in MARKERS.finditer(text)}


def with_cards(text: str, cards: dict[str, str]) -> str:
    """The page's text with each card put between its markers; a card without markers in the page is an error."""
    missing = sorted(set(cards) - set(cards_in(text)))
    if missing:
        raise ValueError(f"the page has no markers for {missing}: add `<!-- model card: NAME: begin -->` and "
                         f"`<!-- model card: NAME: end -->` where each card goes")

    def replaced(match: re.Match) -> str:
        checkpoint = match["checkpoint"]
        card = cards.get(checkpoint, match["card"].strip("\n"))
        return f"<!-- model card: {checkpoint}: begin -->\n\n{card}\n\n<!-- model card: {checkpoint}: end -->"

    return MARKERS.sub(replaced, text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help=f"rewrite the cards in {DOC.relative_to(ROOT)}")
    action.add_argument("--check", action="store_true",
                        help=f"exit 1 when the cards in {DOC.relative_to(ROOT)} differ from the checkpoints'")
    args = parser.parse_args(argv)
    cards = {checkpoint: card_of(checkpoint) for checkpoint in shipped_checkpoints()}
    text = DOC.read_text(encoding="utf-8")
    if args.write:
        DOC.write_text(with_cards(text, cards), encoding="utf-8")
    elif args.check:
        stale = sorted(checkpoint for checkpoint, card in cards.items() if cards_in(text).get(checkpoint) != card)
        if stale:
            print(f"{DOC.relative_to(ROOT)}: the cards of {stale} differ from metrics.json; run `{COMMAND}`",
                  file=sys.stderr)
            return 1
    else:
        sys.stdout.write("\n\n".join(cards.values()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
