"""The Cause tab's handlers on the shipped en-de model, each against an independent computation: the worked pair is
the docs' own, the disagreements listed are the cells where the analysis's estimate and exact share differ (computed
here from its grids), and the picker's corrupted sentence is the source with the word replaced by hand, as the
command line's `--replace-piece` makes it."""
import re
import shlex

import gradio as gr
import numpy as np
import pytest

from transformer import Translator
from transformer.analysis.causal import causal_patching, question_of, replaced_source, same_count_suggestions
from transformer.analysis.registry import ModelAccess

from .conftest import ROOT, SHIPPED, recorded

DISAGREE = 0.2  # docs/patching.md: "the cells that differ by more than 0.2 in restored share"


@pytest.fixture(scope="module")
def tab():
    """(ui, the example's result, the tab's module) with the page built on the shipped models."""
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.shell import build_demo
    from explorer.views import cause

    _, ui = build_demo(discover(ROOT / "checkpoints"))
    result = ui.translate(Request.build(ui.registry, cause.EXAMPLE.clean, cause.EXAMPLE.model),
                          only=ui.first_screen)["result"]
    return ui, result, cause


def test_the_worked_pair_is_the_docs_example():
    from explorer.views.cause import EXAMPLE

    docs = (ROOT / "docs" / "patching.md").read_text(encoding="utf-8")
    command = next(line for line in docs.splitlines() if line.startswith("python -m transformer.analysis patch")
                   and "--corrupted" in line)
    words = shlex.split(command)
    given = {flag: words[words.index(flag) + 1] for flag in ("--model", "--clean", "--corrupted", "--target",
                                                             "--contrast")}
    assert given == {"--model": EXAMPLE.model, "--clean": EXAMPLE.clean, "--corrupted": EXAMPLE.corrupted,
                     "--target": str(EXAMPLE.target), "--contrast": EXAMPLE.contrast}


def test_the_example_button_fills_the_fields_and_picks_the_examples_model(tab):
    _, _, cause = tab
    fields = ["source", "model", "corrupted", "target", "contrast", "noise"]
    chosen = cause.example_values("de-en", fields)
    assert chosen == {"source": "The old man sits on the bank of the river.", "model": "en-de",
                      "corrupted": "The old man sits on the bank of the city.", "target": 8, "contrast": "▁der",
                      "noise": False}
    assert cause.example_values("en-de", fields)["model"] == gr.update()  # the model kept: no redraw of every view


def test_the_listed_disagreements_are_the_cells_where_estimate_and_exact_differ(tab):
    ui, result, cause = tab
    example = cause.EXAMPLE
    shown = cause.found_cause(ui, result, 0, example.corrupted, example.target, example.contrast, False, None)
    rows = shown[ui.components["cause_disagreements"]]

    translator = Translator.from_pretrained(SHIPPED)
    clean = translator.translate(example.clean, max_length=64, **recorded(translator))
    found = causal_patching(translator.model, question_of(ModelAccess(translator.model, translator.tokenizer), clean,
                                                          example.corrupted, example.target, example.contrast))
    titles = {"residual": "Residual stream after the layer", "attention": "Self-attention output",
              "feed_forward": "Feed-forward output", "cross": "Cross-attention heads",
              "encoder_self": "Encoder self-attention heads", "decoder_self": "Decoder self-attention heads",
              "cross_keys_values": "Cross-attention reading the clean memory (keys and values only)"}
    expected = {}
    for exact, estimate in zip(found.grids, found.estimates):
        for layer, column in zip(*np.nonzero(np.abs(np.nan_to_num(exact.shares - estimate.shares)) > DISAGREE)):
            where = (f"position {column + 1} ({clean.src_tokens[column]})" if exact.axes[1] == "position"
                     else f"head {column + 1}")
            expected[(titles[exact.site], int(layer) + 1, where)] = (exact.shares[layer, column],
                                                                     estimate.shares[layer, column])
    listed = {(row[0], row[1], row[2]): (row[3], row[4]) for row in rows}
    assert listed.keys() == expected.keys() and len(rows) == len(expected) > 0
    for cell, (exact, estimate) in expected.items():
        # the page rounds to 3 decimals; the two runs' sums may differ in the last bits (torch's kernels)
        assert listed[cell] == pytest.approx((exact, estimate), abs=1e-3), cell
    gaps = [abs(row[4] - row[3]) for row in rows]
    assert gaps == sorted(gaps, reverse=True)  # the largest disagreement first
    agreement = shown[ui.components["cause_agreement"]]
    assert f"{len(expected)} cells differ by more than 0.2" in agreement
    assert agreement.startswith('<p class="ae-title">Attribution patching')  # a title the glossary marks
    page = (ROOT / "docs" / "patching.md").read_text(encoding="utf-8")
    assert f"{len(expected)} cells differ from the" in page  # the docs' worked example tells the same count
    assert len(shown[ui.components["cause_shown"]][1]) == 3  # the saved file carries the table too


def test_the_picker_replaces_one_piece_by_the_command_lines_rule(tab):
    ui, result, cause = tab
    translation = result.translations[0]
    drawn = ui.view("cause").render(result, {"sentence": 0}, ui.context("en-de"), "translation")
    assert drawn["cause_piece"]["choices"] == [(f"{n}: {p}", n) for n, p in enumerate(translation.src_tokens[:-1], 1)]
    river = translation.src_tokens.index("▁river") + 1
    offered = cause.suggested(ui, result, 0, river)
    translator = Translator.from_pretrained(SHIPPED)
    nearest = same_count_suggestions(translator.model, translator.tokenizer, translation.src_ids, river - 1)
    assert offered["choices"] == [p.lstrip("▁") for p in nearest] and offered["value"] == nearest[0].lstrip("▁")
    for word in (offered["value"], "city"):
        assert cause.replaced(result, 0, river, word) == cause.EXAMPLE.clean.replace("river", word)
    from transformer.analysis.causal.cli import run

    by_command = run(["--model", "en-de", "--clean", cause.EXAMPLE.clean, "--replace-piece", str(river), "--target",
                      "8", "--analyses", "attribution"])["corrupted"]["text"]
    assert by_command == cause.replaced(result, 0, river, offered["value"])  # one rule for the tab and the CLI
    ends = len(translation.src_tokens)
    with pytest.raises(gr.Error, match=re.escape(f"replace_piece must be a source piece, in [1, {ends - 1}], got "
                                                 f"{ends}")):
        cause.replaced(result, 0, ends, "lake")  # the </s>: refused as `--replace-piece` refuses it
    with pytest.raises(gr.Error, match="replacement must be one word"):
        cause.replaced(result, 0, river, "two words")


def test_a_replacement_keeps_the_word_boundaries_of_the_piece_it_replaces():
    assert replaced_source(["▁The", "▁dog", "▁walk", "s", ".", "</s>"], 3, "ed") == "The dog walked."
    assert replaced_source(["▁The", "▁dog", "▁walk", "s", ".", "</s>"], 1, "▁cat") == "The cat walks."
    with pytest.raises(ValueError, match=r"in \[1, 5\], got 6"):
        replaced_source(["▁The", "▁dog", "▁walk", "s", ".", "</s>"], 5, "x")


def test_the_tabs_terms_carry_glossary_marks(tab):
    from explorer.glossary import page_terms

    ui, _, _ = tab
    terms = page_terms()
    for term in ("activation patching", "attribution patching", "logit difference", "causal tracing"):
        assert terms.get(term), term
    labels = {name: ui.components[name].label for name in ("cause_corrupted", "cause_contrast",
                                                           "cause_disagreements")}
    # page.py's marks take the first term a label uses: these labels must lead with the tab's own terms
    names = sorted(terms, key=len, reverse=True)
    first = {name: re.search("(" + "|".join(map(re.escape, names)) + ")", label, re.I).group(1).lower()
             for name, label in labels.items()}
    assert first == {"cause_corrupted": "activation patching", "cause_contrast": "logit difference",
                     "cause_disagreements": "attribution patching"}
