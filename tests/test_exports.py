"""Exports that reproduce a run: what produced them, numbered from 1, and a bertviz export that the real
bertviz package renders."""
import csv
import hashlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import tomllib
import torch

from explorer.exports import export_files
from explorer.registry import discover
from explorer.request import Request
from explorer.session import run

from .conftest import ROOT, SHIPPED


@pytest.fixture(scope="module")
def exported():
    registry = discover(ROOT / "checkpoints")
    request = Request.from_api(registry, "Two dogs play in the snow.\nA man sleeps.", "en-de", strategy="beam",
                               settings={"beam_size": 3}, max_length=40)
    result = run(registry, request)
    return result, {Path(p).name: Path(p) for p in export_files(result, registry)}


def test_the_json_export_says_what_produced_it(exported):
    result, files = exported
    data = json.loads(files["translation.json"].read_text(encoding="utf-8"))
    run_info = data["run"]
    assert run_info["weights_sha256"] == hashlib.sha256((SHIPPED / "model.safetensors").read_bytes()).hexdigest()
    assert run_info["direction"] == {"src": "en", "tgt": "de"} and run_info["model"] == "en-de"
    assert run_info["strategy"] == "beam" and run_info["settings"]["beam_size"] == 3
    assert run_info["settings"]["max_length"] == 40
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert run_info["app_version"] == pyproject["project"]["version"]
    sentence = data["sentences"][0]
    assert [s["step"] for s in sentence["steps"]] == list(range(1, len(sentence["tgt_tokens"]) + 1))
    assert all(node["step"] == node["depth"] + 1 for node in sentence["tree"]["nodes"])


def test_the_bertviz_export_renders_through_bertviz(exported):
    bertviz = pytest.importorskip("bertviz", reason="bertviz is in requirements-test.txt")
    result, files = exported
    data = json.loads(files["bertviz.json"].read_text(encoding="utf-8"))
    translation = result.translations[0]
    attention = {kind: [torch.tensor(layer) for layer in data[f"{kind}_attention"]]
                 for kind in ("encoder", "decoder", "cross")}
    layers, heads = translation.recorded["cross"].values.shape[:2]
    assert len(attention["cross"]) == layers
    assert tuple(attention["cross"][0].shape) == (1, heads, len(translation.tgt_tokens), len(translation.src_tokens))
    torch.testing.assert_close(  # the export rounds weights <= 1 to 6 decimals: 5e-7
        attention["decoder"][1][0], torch.from_numpy(translation.recorded["decoder_self"].values[1]), atol=1e-6, rtol=0
    )
    assert data["decoder_tokens"] == translation.decoder_input_tokens
    for view in (bertviz.head_view, bertviz.model_view):
        html = view(encoder_attention=attention["encoder"], decoder_attention=attention["decoder"],
                    cross_attention=attention["cross"], encoder_tokens=data["encoder_tokens"],
                    decoder_tokens=data["decoder_tokens"], html_action="return")
        assert "encoder" in html.data.lower() and len(html.data) > 1000


def test_the_exports_carry_norm_based_attention_beside_the_weights(exported):
    """The JSON holds ‖f(x_key)‖ per layer, head and key, and ‖α f(x)‖ = α ‖f(x)‖ per cell; the CSV a column of
    the latter. The norms are checked against value vectors rebuilt from the weights (tests/test_norms.py)."""
    from .test_norms import independent_vectors

    result, files = exported
    translation = result.translations[0]
    data = json.loads(files["translation.json"].read_text(encoding="utf-8"))["sentences"][0]
    model = discover(ROOT / "checkpoints").get("en-de").translator.model
    vectors = independent_vectors(model, translation.src_ids, translation.tgt_ids)
    for kind, entry in data["attention"].items():
        norms, weights = np.array(entry["norms"]), np.array(entry["weights"])
        # float32 norms of order 1-10 against a float64 rebuild (1e-4 relative); the weighted norms against the
        # product of two numbers each rounded to 6 decimals, of order 10 (2e-5)
        np.testing.assert_allclose(norms, np.linalg.norm(vectors[kind], axis=-1), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(entry["weighted_norms"], weights * norms[:, :, None, :], atol=2e-5)
    rows = list(csv.DictReader(io.StringIO(files["attention.csv"].read_text(encoding="utf-8"))))
    first = rows[0]
    expected = data["attention"][first["kind"]]["weighted_norms"][0][0][0][0]
    assert float(first["weighted_norm"]) == pytest.approx(expected, abs=2e-6)  # both rounded to 6 decimals


def test_the_standalone_live_view_is_one_small_file_that_names_its_run(exported):
    """One file per sentence, with the payload, the browser code and the styles inside and nothing to fetch."""
    result, files = exported
    for number, translation in enumerate(result.translations, start=1):
        page = files[f"live-attention-{number}.html"].read_text(encoding="utf-8")
        assert page.count("<script") == 1 and not re.search(r"<(script|img|link|iframe)[^>]*\b(src|href)\s*=", page)
        assert set(re.findall(r"https?://[^\s\"'`]+", page)) <= {
            "http://www.w3.org/2000/svg"
        }  # a namespace, not fetched
        assert "weightedNorms" in page and ".ae-live" in page and "en-de" in page
        assert len(page.encode("utf-8")) < 2_000_000
