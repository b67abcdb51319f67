"""docs/features.md against the shipped dictionary: its table row is the dictionary's config.json, and its worked
example's latents, drops and steered translation are what the package computes on the shipped model now; its
`top --piece` commands find latents."""
import json
import re

import numpy as np
import pytest

from transformer import Translator
from transformer.features import load_dictionary
from transformer.features.catalogue import load_catalogue
from transformer.features.cli import main
from transformer.features.steering import Edit, causes, steer
from transformer.tokenizer import Tokenizer

from .conftest import ROOT

PAGE = (ROOT / "docs" / "features.md").read_text(encoding="utf-8")
FOLDER = ROOT / "checkpoints" / "en-de" / "features" / "encoder_layers.3.output"
SENTENCE = "The boat is on the river."


def test_every_table_row_is_its_shipped_config_and_every_shipped_dictionary_has_a_row():
    rows = [line for line in PAGE.splitlines() if re.match(r"\| (en-de|de-en) \| `", line)]
    shipped = sorted(ROOT.glob("checkpoints/*/features/*/config.json"))
    assert len(rows) == len(shipped) >= 1
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        point = re.match(r"`([^`]+)`", cells[1]).group(1)
        config = ROOT / "checkpoints" / cells[0] / "features" / point / "config.json"
        metrics = json.loads(config.read_text())["metrics"]
        identical = f"{100 * metrics['greedy_identical']:.1f} %"
        assert cells[2:6] == [f"{metrics['fvu']:.3f}", str(metrics["dead_latents"]),
                              f"{metrics['mean_active_latents']:.1f}", identical], row
        change = f"{metrics['bleu_change']:+.2f}".replace("-", "−")  # the page's minus sign
        assert cells[6] == f"{metrics['bleu']:.2f} → {metrics['bleu_replaced']:.2f} ({change})", row
        assert cells[7] == f"{metrics['seconds']:.0f} s", row
    held_out = json.loads((FOLDER / "config.json").read_text())["metrics"]["tokens"]
    assert f"{held_out:,} on the English side" in PAGE


def test_the_worked_example_gives_the_numbers_the_page_states():
    translator = Translator.from_pretrained("en-de")
    saved = load_dictionary(FOLDER)
    target = translator.translate(SENTENCE, strategy="greedy").text
    assert f'translates to "{target}"' in PAGE
    first, second, third = causes(translator, saved, SENTENCE, target, piece=2)[:3]
    stated = re.search(r"latent \*\*(\d+)\*\* first\. Removing it lowers log p\(\"▁befindet\"\) by "
                       r"\*\*([0-9.]+)\*\*; gradient ×\nactivation estimated ([0-9.]+)\. "
                       r"Latents (\d+) \(([0-9.]+)\) and (\d+) \(([0-9.]+)\)", PAGE)
    assert stated, "the worked example's sentence changed shape"
    # float32 sums in another order on another CPU: the page's two decimals within 0.01
    assert (first.latent, second.latent, third.latent) == tuple(int(stated.group(i)) for i in (1, 4, 6))
    for value, text in ((first.exact, 2), (first.estimate, 3), (second.exact, 5), (third.exact, 7)):
        assert value == pytest.approx(float(stated.group(text)), abs=0.01)
    steered = steer(translator, saved, SENTENCE, [Edit(first.latent, 0.0)], strategy="greedy")
    assert steered.before == target
    assert f'"{steered.after.replace(" ist ", " **ist** ")}"' in PAGE.replace("\n", " ")


def test_every_top_piece_command_on_the_page_finds_latents_in_its_catalogue(capsys):
    """The page's `top DICTIONARY --piece P` lines, run: each prints latents, and they are the ones whose kept contexts
    in the dictionary's catalogue are on P's piece (read from its arrays here)."""
    commands = re.findall(r"python -m transformer\.features top (checkpoints/\S+) --piece (\S+)\n", PAGE)
    assert commands, "the page shows no `top --piece` command"
    for folder, piece in commands:
        main(["top", str(ROOT / folder), "--piece", piece])
        printed = json.loads(capsys.readouterr().out)
        catalogue = load_catalogue(ROOT / folder)
        model = ROOT / "checkpoints" / folder.split("/")[1]
        ids = {Tokenizer.load(model / "spm.model").piece_to_id(form) for form in (piece, "▁" + piece.lstrip("▁"))}
        on = np.isin(catalogue.piece, list(ids)) & (catalogue.sentence >= 0)  # (n, K) kept contexts on the piece
        assert printed["latents"] and {row["latent"] for row in printed["latents"]} <= set(np.flatnonzero(on.any(1)))
