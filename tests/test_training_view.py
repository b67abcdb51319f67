"""The Training view on a checkpoint trained here with its timeline: the numbers it draws are the
timeline's, and in the browser the epoch slider changes the translation shown."""
from pathlib import Path

import numpy as np
import pytest

from explorer.registry import discover
from explorer.shell import CSS, build_demo
from explorer.views import MODEL
from transformer import train as train_cli
from transformer.training.timeline import Timeline

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def trained_root(corpus_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    train_cli.main(["--data-dir", str(corpus_dir), "--out", str(root / "toy"), "--vocab-size", "290", "--d-model", "32",
                    "--n-heads", "4", "--n-layers", "1", "--d-ff", "64", "--dropout", "0.0", "--attention-dropout", "0",
                    "--epochs", "4", "--max-tokens", "600", "--warmup", "30", "--lr", "3e-3", "--average", "2",
                    "--threads", "1", "--test-split", ""])
    return root


def test_the_timeline_holds_every_epoch_of_the_run(trained_root, corpus_dir):
    timeline = Timeline.load(trained_root / "toy")
    assert [e["epoch"] for e in timeline.epochs] == [1, 2, 3, 4]
    # the run says how it started, and on which corpus when it is not the default one, named without this machine's
    # absolute path (the temporary corpus lies outside the working directory: its last two parts)
    corpus = f"{corpus_dir.parent.name}/{corpus_dir.name}"
    assert timeline.stages == [{"first_epoch": 1, "label": f"from scratch, trained on {corpus}"}]
    assert len(timeline.sentences) == 8 and all(len(e["outputs"]) == 8 for e in timeline.epochs)
    weights, rows, cols = timeline.attention(2, 0, "cross")
    assert weights.shape[-2:] == (len(rows), len(cols)) and cols == timeline.epochs[1]["outputs"][0]["src"]
    # float16 rows still sum to one: each weight rounded by up to 2**-11 of itself, so a row within ~5e-4 of 1
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=2e-3)
    assert sum(p.stat().st_size for p in (trained_root / "toy").glob("timeline.*")) < 5_000_000


def test_the_view_draws_the_recorded_maps_and_curves(trained_root):
    demo, ui = build_demo(discover(trained_root))
    timeline = Timeline.load(trained_root / "toy")
    state = ui.default_state() | {"timeline_epoch": 3, "timeline_sentence": 1, "timeline_kind": "encoder_self",
                                  "layer": "0", "head": "2"}
    named = ui.render_named(ui.views, None, state, "toy", "timeline_epoch")
    expected = timeline.maps["3/1/encoder_self"].float().numpy()[0, 2]
    # the figure rounds the stored float16 weights to 4 decimals (explorer/figures/theme.py DECIMALS): 5e-5
    np.testing.assert_allclose(np.asarray(named["timeline_attention"].data[0].z, dtype=np.float32), expected, atol=1e-4)
    assert timeline.epochs[2]["outputs"][1]["text"] in named["timeline_text"]
    curves = named["timeline_curves"].data
    assert list(curves[1].y) == [e["val_bleu"] for e in timeline.epochs]
    opened = ui.render_named(ui.views, None, ui.default_state(), "toy", MODEL)
    assert opened["timeline_epoch"]["maximum"] == 4


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")
@pytest.mark.browser
def test_moving_the_epoch_slider_changes_the_translation_shown(trained_root):
    from playwright.sync_api import expect, sync_playwright

    from .test_browser import CHROMIUM_ARGS, TIMEOUT

    timeline = Timeline.load(trained_root / "toy")
    first, last = (timeline.epochs[i]["outputs"][0]["text"] for i in (0, -1))
    assert first != last
    demo, _ = build_demo(discover(trained_root))
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", server_port=None,
                            run_history=False, css=CSS)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url)
            expect(page.locator("#footer")).to_contain_text("decoding", timeout=TIMEOUT)  # its load events answered
            page.get_by_role("tab", name="Training").click()
            expect(page.locator("#timeline-text")).to_contain_text("Epoch 1", timeout=TIMEOUT)
            slider = page.locator("#timeline-epoch input[type=number]")
            slider.fill("4")
            slider.press("Enter")
            expect(page.locator("#timeline-text")).to_contain_text("Epoch 4", timeout=TIMEOUT)
            expect(page.locator("#timeline-text")).to_contain_text(last, timeout=TIMEOUT)
            page.wait_for_function("() => document.querySelector('#timeline-attention .js-plotly-plot')?.layout"
                                   ".title.text.startsWith('Epoch 4')", timeout=TIMEOUT)
            browser.close()
    finally:
        demo.close()
