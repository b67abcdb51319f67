"""A converted Marian model in the app: served beside the shipped checkpoints through ATTENTION_EXPLORER_HUB_MODELS
(its converted folder already in the cache, so no network), listed by its languages, its live view drawn."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from transformer import Translator

from .conftest import ROOT
from .test_browser import CHROMIUM, TIMEOUT, browser, choose, open_page  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
transformers = pytest.importorskip("transformers")
SENTENCE = "the cat runs over the big house."
LABEL = "English → German (tiny-marian)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def marian_app(tmp_path_factory):
    """(url, the converted model's Translator): app.py in its own process, serving checkpoints/ and the model."""
    from transformer.convert_marian import convert

    from .marian_fixtures import write_hf_marian, write_tokenizer_files

    root = tmp_path_factory.mktemp("marian-app")
    hf_folder = write_hf_marian(root / "hf", write_tokenizer_files(root / "spm"))
    folder = convert(str(hf_folder), root / "cache" / "tiny-marian")
    with hub_app({"ATTENTION_EXPLORER_HUB_MODELS": "local/tiny-marian",
                  "ATTENTION_EXPLORER_HUB_CACHE": str(root / "cache")}, root / "server.log") as url:
        yield url, Translator.from_pretrained(folder)


@contextmanager
def hub_app(settings: dict, log: Path):
    """The URL of app.py in its own process, with `settings` in its environment (the Hub models it serves, from a
    cache it finds them in), its output in `log`; stopped afterwards."""
    env = {**os.environ, **settings, "ATTENTION_EXPLORER_WORKERS": "0", "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_SERVER_PORT": str(free_port())}
    with log.open("w") as written:
        server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=written, stderr=written)
    url = f"http://127.0.0.1:{env['GRADIO_SERVER_PORT']}/"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url, timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    pytest.fail(f"app.py did not start: {log.read_text()[-2000:]}")
                time.sleep(1)
        yield url
    finally:
        server.terminate()
        server.wait(30)


def test_a_converted_marian_model_is_served_and_drawn(browser, marian_app):  # noqa: F811
    from playwright.sync_api import expect

    url, reference = marian_app
    page = open_page(browser, url, 1400, 900)
    choose(page, "Model", LABEL)  # listed by its languages, beside the shipped models
    page.get_by_label("Source text").fill(SENTENCE)
    page.get_by_role("button", name="Translate").click()
    live = page.locator("#live-attention")
    live.locator(".ae-heatmap").wait_for(timeout=TIMEOUT)
    live.locator("select.ae-kind").select_option("encoder_self")
    expected = reference.translate(SENTENCE, capture=True)
    expect(live.locator(".ae-col-label").first).to_be_visible(timeout=TIMEOUT)
    assert live.locator(".ae-col-label").all_text_contents() == expected.src_tokens  # Marian's pieces, </s> last
    # the compiled step runs the shipped models where it is built; the footer says why this one steps in Python
    footer = page.locator("#footer").inner_text()
    assert f"{LABEL} decodes through the Python step: the kernel runs pre-norm layers" in footer, footer
    page.close()
