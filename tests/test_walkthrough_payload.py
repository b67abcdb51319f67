"""The walk-through's payload for the page (explorer/views/walkthrough_payload.py): at most 300 KB as the page
receives it for the shipped model's 20-piece sentence, at its largest over every piece and step; and, inflated and
decoded here with zlib and numpy (not the module's own code), every stage's numbers at several layers and heads
agree with what the API sends at full precision (walk_json). tests/js/walk_data.test.js checks the browser's side."""
import base64
import json
import zlib

import numpy as np
import pytest

from explorer.views.walkthrough_payload import walk_json, walk_payload
from transformer import Translator
from transformer.analysis.walkthrough import walkthrough

from .conftest import SHIPPED

# bench/bench_walkthrough.py's sentence: 20 source pieces, 17 output pieces with the shipped en-de model
SENTENCE_20 = "A young woman in a red dress and a small boy are walking along the sandy beach."
BUDGET_KB = 300  # docs/walkthrough.md's target


@pytest.fixture(scope="module")
def translated():
    translator = Translator.from_pretrained(SHIPPED)
    return translator, translator.translate(SENTENCE_20, strategy="greedy")


def sent_kb(payload) -> float:
    """The payload's size as JSON, as the page receives it."""
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()) / 1024


def test_the_largest_walk_fits_its_budget(translated):
    translator, translation = translated
    assert len(translation.src_ids) == 20
    walks = [(token, 0) for token in range(len(translation.src_ids))] + \
            [(0, step) for step in range(1, len(translation.tgt_ids))]
    sizes = [sent_kb(walk_payload(walkthrough(translator.model, translator.tokenizer, translation, token=token,
                                              step=step, head=0))) for token, step in walks]
    assert max(sizes) <= BUDGET_KB, f"largest walk {max(sizes):.1f} KB (median {np.median(sizes):.1f} KB)"


def inflated(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text))


def decoded(entry: dict, block: bytes) -> np.ndarray:
    raw = block[entry["offset"]: entry["offset"] + entry["length"]]
    if entry["dtype"] == "i8":
        whole = np.frombuffer(raw, np.int8).astype(np.float64)
        values = np.where(whole == -128, -np.inf, whole * entry["scale"])
    else:
        values = np.frombuffer(raw, "<f2" if entry["dtype"] == "f16" else "<f4").astype(np.float64)
    return values.reshape(entry["shape"])


def numeric(values) -> np.ndarray:
    return np.array(values, dtype=object).astype(str).astype(np.float64)  # "-inf" as the API writes it -> -inf


@pytest.mark.parametrize("layer, head", [(0, 0), (3, 3), (1, 2)])
def test_every_stage_decodes_to_what_the_api_sends(translated, layer, head):
    translator, translation = translated
    walk = walkthrough(translator.model, translator.tokenizer, translation, token=3, step=5, head=1)
    payload, sent = walk_payload(walk), walk_json(walk)
    document, block = json.loads(inflated(payload["document"])), inflated(payload["data"])
    heads = payload["heads"]
    for stage, full in zip(document["stages"], sent["stages"]):
        index = {None: 0, "layer": layer, "head": layer * heads + head}[stage["per"]]
        version, first = stage["variants"][index], stage["variants"][0]
        expected = (full["variants"][index] if full["per"] else full)["numbers"]
        numbers = version.get("numbers") or first["numbers"]
        values = version.get("values") or [n["values"] for n in numbers]
        assert len(numbers) == len(expected)
        for n, value, want in zip(numbers, values, expected):
            assert n["name"] == want["name"] and n["label"] == want["label"], stage["key"]
            if n["kind"] not in ("vector", "row", "matrix"):
                assert value == want["values"], (stage["key"], n["name"])
                continue
            entry = document["pool"][value]
            got, wanted = decoded(entry, block), numeric(want["values"])
            assert got.shape == wanted.shape, (stage["key"], n["name"])
            # int8: half a step of the array's scale; float16: 11 significant bits; plus the API's 6 decimals
            finite = np.isfinite(wanted)
            assert np.array_equal(np.isfinite(got), finite), (stage["key"], n["name"])
            got, wanted = got[finite], wanted[finite]
            tolerance = entry["scale"] / 2 if entry["dtype"] == "i8" else np.abs(wanted) * 2.0 ** -11
            assert np.all(np.abs(got - wanted) <= tolerance + 1e-6), (stage["key"], n["name"])


def test_the_logits_decode_over_the_whole_vocabulary(translated):
    translator, translation = translated
    walk = walkthrough(translator.model, translator.tokenizer, translation, token=0, step=2, head=0)
    payload = walk_payload(walk)
    document, block = json.loads(inflated(payload["document"])), inflated(payload["data"])
    logits = document["logits"]
    below = decoded({"dtype": "f16", "shape": [logits["size"]], **logits["below"]}, block)
    exact = decoded({"dtype": "f32", "shape": [len(logits["top"])], **logits["exact"]}, block)
    values = logits["largest"] - below
    values[logits["top"]] = exact
    want = np.asarray(walk.logits, np.float64)
    finite = np.isfinite(want)
    assert np.array_equal(np.isfinite(values), finite)
    # float16 distances below the largest: 2^-11 of the distance, relative
    distance = logits["largest"] - want[finite]
    assert np.all(np.abs(values[finite] - want[finite]) <= distance * 2.0 ** -11 + 1e-6)
