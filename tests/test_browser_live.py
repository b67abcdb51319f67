"""The live attention view in the browser: on the first screen, drawn client-side (no request when switching),
a lines view that follows a hovered token and toggles heads, and every token labelled at phone width."""
import re
from pathlib import Path

import pytest

from .conftest import recorded, shipped
from .test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT, browser, open_translated, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "Two dogs are running through the snow."
# What the page shows against the test's own computation: the trace carries one byte per weight (1/255 steps, at most
# 1/510 off), the cells show 3 decimals (5e-4 more), and the server computes in its own thread, whose float32
# rounding may move a weight across a step's midpoint: within 1 / 255 + 1e-3. Shares are sent with 3 decimals.


def translated_page(browser, url, width, height, **options):  # noqa: F811
    from playwright.sync_api import expect

    page = open_translated(browser, url, SENTENCE, width, height, **options)
    page.locator("#live-attention .ae-heatmap").wait_for(timeout=TIMEOUT)
    expect(page.locator("#step-text")).to_contain_text("Step 1 of", timeout=TIMEOUT)  # the open tab, drawn after
    return page


def state(page):
    return page.evaluate("() => JSON.parse(document.querySelector('#live-attention .ae-live').dataset.state)")


def test_the_attention_view_is_on_the_first_screen(browser, server_url):  # noqa: F811
    page = translated_page(browser, server_url, 1400, 900)
    box = page.locator("#live-attention .ae-heatmap").bounding_box()
    assert box["y"] + min(box["height"], 200) <= 900 and box["x"] + 100 <= 1400  # inside the first screen
    for selector in ("#source", "#translate-button", "#translation"):
        assert page.locator(selector).bounding_box()["y"] < 900
    page.screenshot(path=str(SCREENSHOTS / "first-screen.png"))
    page.close()


def test_switching_draws_in_the_browser_without_asking_the_server(browser, server_url):  # noqa: F811
    page = translated_page(browser, server_url, 1400, 900)
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    live = page.locator("#live-attention")
    reference = shipped()
    expected = reference.translate(SENTENCE, capture=True, **recorded(reference))
    changes = [("select.ae-kind", "encoder_self"), ("select.ae-layer", "0"), ("select.ae-head", "2")]
    for selector, value in changes:
        live.locator(selector).select_option(value)
    assert state(page) == {"kind": "encoder_self", "layer": 0, "head": 2, "mode": "heatmap", "step": None}
    weights = [float(w) for w in live.locator(".ae-cell").evaluate_all("cells => cells.map(c => c.dataset.weight)")]
    source = expected.recorded["encoder_self"].values[0, 2]
    assert len(weights) == source.size
    assert max(abs(a - b) for a, b in zip(weights, source.ravel())) <= 1 / 255 + 1e-3  # the recorded weights, bytes
    assert live.locator(".ae-col-label").all_text_contents() == expected.src_tokens
    live.locator("select.ae-kind").select_option("cross")
    live.locator("input.ae-step").evaluate("(el) => { el.value = 2; el.dispatchEvent(new Event('input')); }")
    assert state(page)["step"] == 2 and live.locator(".ae-row-label").count() == 2  # the prefix so far
    live.locator("select.ae-layer").select_option("overview")
    config = reference.model.config
    assert live.locator(".ae-tile").count() == config.n_layers * config.n_heads
    live.locator(".ae-tile[data-layer='1'][data-head='3']").click()
    assert state(page)["layer"] == 1 and state(page)["head"] == 3
    assert requests == [], requests  # every switch above was drawn without a request
    page.close()


def test_weighted_norms_switch_in_the_browser_and_show_each_keys_share(browser, server_url):  # noqa: F811
    """The weights/norms switch redraws every map from the same payload, without a request: the cells are α ‖f(x)‖
    per query row scaled to sum to 1, with ‖f(x)‖ from value vectors rebuilt in tests/test_norms.py."""
    import numpy as np

    from .test_norms import independent_vectors

    page = translated_page(browser, server_url, 1400, 900)
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    live = page.locator("#live-attention")
    for selector, value in [("select.ae-kind", "cross"), ("select.ae-layer", "1"), ("select.ae-head", "2"),
                            ("select.ae-measure", "norms")]:
        live.locator(selector).select_option(value)
    assert page.evaluate("() => document.querySelector('#live-attention .ae-live').dataset.measure") == "norms"
    assert "weighted norms" in live.locator(".ae-title").inner_text()
    reference = shipped()
    expected = reference.translate(SENTENCE, capture=True, **recorded(reference))
    norms = np.linalg.norm(independent_vectors(reference.model, expected.src_ids, expected.tgt_ids)["cross"], axis=-1)
    weights = np.rint(expected.recorded["cross"].values[1, 2] * 255) / 255 * norms[1, 2][None, :]
    shares = weights / weights.sum(axis=-1, keepdims=True)
    cells = [float(w) for w in live.locator(".ae-cell").evaluate_all("cells => cells.map(c => c.dataset.weight)")]
    assert len(cells) == shares.size
    assert max(abs(a - b) for a, b in zip(cells, shares.ravel())) <= 2e-3  # 3 decimals shown
    live.locator("select.ae-measure").select_option("weights")
    cells = [float(w) for w in live.locator(".ae-cell").evaluate_all("cells => cells.map(c => c.dataset.weight)")]
    assert max(abs(a - b) for a, b in zip(cells, expected.recorded["cross"].values[1, 2].ravel())) <= 1 / 255 + 1e-3
    assert requests == [], requests
    page.close()


def test_the_saved_live_view_opens_from_disk_and_switches_heads_offline(browser, tmp_path):  # noqa: F811
    """The export's standalone HTML, opened from file:// with every network request refused: it draws, switches a
    head and the norms in the browser, and a 30-token sentence's file stays under 2 MB."""
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.session import run
    from explorer.standalone import live_view_html

    from .conftest import ROOT

    long = ("A young woman in a long red dress and a small boy with a yellow kite are walking together along the "
            "sandy beach near the old wooden pier.")
    registry = discover(ROOT / "checkpoints")
    result = run(registry, Request.from_api(registry, long))
    translation = result.translations[0]
    assert len(translation.src_ids) >= 30
    path = tmp_path / "live.html"
    path.write_text(live_view_html(translation, {"model": "en-de", "app_version": "test"}), encoding="utf-8")
    assert path.stat().st_size < 2_000_000
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    fetched = []
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else
               (fetched.append(route.request.url), route.abort()))
    page.goto(path.as_uri())
    live = page.locator("#live-attention")
    live.locator(".ae-heatmap").wait_for(timeout=TIMEOUT)
    for selector, value in [("select.ae-kind", "encoder_self"), ("select.ae-layer", "0"), ("select.ae-head", "1")]:
        live.locator(selector).select_option(value)
    assert state(page) == {"kind": "encoder_self", "layer": 0, "head": 1, "mode": "heatmap", "step": None}
    cells = [float(w) for w in live.locator(".ae-cell").evaluate_all("cells => cells.map(c => c.dataset.weight)")]
    recorded = translation.recorded["encoder_self"].values[0, 1]
    assert len(cells) == recorded.size
    assert max(abs(a - b) for a, b in zip(cells, recorded.ravel())) <= 1 / 255 + 1e-3
    live.locator("select.ae-measure").select_option("norms")
    assert "weighted norms" in live.locator(".ae-title").inner_text()
    # the drawing as a figure file: SVG with the tokens as text, and PNG
    with page.expect_download() as download:
        live.locator("button.ae-download[data-format='svg']").click()
    svg = Path(download.value.path()).read_text(encoding="utf-8")
    assert download.value.suggested_filename == "attention-encoder_self-heatmap-layer1-head2-norms.svg"
    assert svg.startswith("<svg") and 'xmlns="http://www.w3.org/2000/svg"' in svg
    assert svg.count('class="ae-cell"') == recorded.size and translation.src_tokens[0] in svg
    with page.expect_download() as download:
        live.locator("button.ae-download[data-format='png']").click()
    assert Path(download.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fetched == []
    page.close()


@pytest.mark.parametrize("markup", ["<!--<script> A dog runs.", "A dog </script><script>window.__ran=1</script>",
                                    "A dog runs. <!-- -->", "</s> & <b>"])
def test_a_saved_page_draws_whatever_markup_its_payload_holds(browser, tmp_path, markup):  # noqa: F811
    """The saved pages (the live view's and the walk's, both standalone.page) embed their payload in a script:
    "<!--<script>" in a walk's sentence put the HTML parser where the real </script> no longer ended it, and the
    page never drew. Chromium's own parser decides here; the text arrives whole and nothing of it runs."""
    from explorer.standalone import page as saved_page

    code = "element.textContent = props.value.source; window.__drawn = props.value.source;"
    path = tmp_path / "saved.html"
    path.write_text(saved_page("saved", "", markup, markup, markup, "", {"source": markup}, code), encoding="utf-8")
    page = browser.new_page(viewport={"width": 800, "height": 600})
    page.goto(path.as_uri())
    assert page.evaluate("() => window.__drawn") == markup
    assert page.locator("#saved").inner_text() == markup and page.locator("h1").inner_text() == markup
    assert page.evaluate("() => window.__ran") is None
    page.close()


def test_the_source_share_strip_and_the_alti_kind(browser, server_url):  # noqa: F811
    """Under the translation: each output piece with the share of its prediction that came from the source
    (ALTI+); and ALTI+ as one more kind in the live view, a row per prediction over source and decoder inputs."""
    import numpy as np

    from transformer.analysis.alti import alti_plus

    page = translated_page(browser, server_url, 1400, 900)
    live = page.locator("#live-attention")
    reference = shipped()
    expected = reference.translate(SENTENCE, **recorded(reference))
    alti = alti_plus(reference.model, expected.src_ids, expected.tgt_ids)
    shares = [float(s) for s in live.locator(".ae-share").evaluate_all("spans => spans.map(s => s.dataset.share)")]
    assert live.locator(".ae-share").all_text_contents() == expected.tgt_tokens
    np.testing.assert_allclose(shares, alti.source_share, atol=2e-3)
    live.locator("select.ae-kind").select_option("alti")
    live.locator("select.ae-layer").select_option(str(reference.model.config.n_layers - 1))
    cells = [float(w) for w in live.locator(".ae-cell").evaluate_all("cells => cells.map(c => c.dataset.weight)")]
    assert len(cells) == alti.matrix.size
    assert max(abs(a - b) for a, b in zip(cells, alti.matrix.ravel())) <= 1 / 255 + 1e-3
    assert live.locator(".ae-col-label").all_text_contents() == expected.src_tokens + expected.decoder_input_tokens
    page.close()


def test_lines_follow_a_hovered_token_and_heads_toggle(browser, server_url):  # noqa: F811
    page = translated_page(browser, server_url, 1400, 900)
    live = page.locator("#live-attention")
    live.locator(".ae-mode[data-mode='lines']").click()
    links = live.locator(".ae-link")
    assert links.count() > 0
    assert len(set(links.evaluate_all("ls => ls.map(l => l.dataset.query)"))) > 1
    live.locator(".ae-token.ae-query").nth(1).hover()
    assert set(links.evaluate_all("ls => ls.map(l => l.dataset.query)")) == {"1"}  # only that token's lines
    page.mouse.move(5, 5)
    live.locator(".ae-lines").dispatch_event("mouseleave")
    heads_before = set(links.evaluate_all("ls => ls.map(l => l.dataset.head)"))
    assert "0" in heads_before
    live.locator(".ae-head-toggle[data-head='0']").click()
    heads_after = set(links.evaluate_all("ls => ls.map(l => l.dataset.head)"))
    assert "0" not in heads_after and heads_after == heads_before - {"0"}  # head 1's colour is gone
    live.screenshot(path=str(SCREENSHOTS / "lines.png"))
    page.close()


def test_every_source_token_is_labelled_at_phone_width(browser, server_url):  # noqa: F811
    page = translated_page(browser, server_url, 390, 844, color_scheme="dark")
    reference = shipped()
    expected = reference.translate(SENTENCE, capture=True, **recorded(reference))
    labels = page.locator("#live-attention .ae-col-label").all_text_contents()
    assert labels == expected.src_tokens  # none dropped: the drawing scrolls instead
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390 + 1  # the page itself does not
    page.locator("#live-attention").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "phone-dark-live.png"))
    page.close()


def test_a_shared_link_restores_the_translation_and_the_view(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    page = translated_page(browser, server_url, 1400, 900)
    page.get_by_text("Decoding settings").click()
    page.get_by_role("radio", name="beam search").check()
    page.get_by_role("button", name="Translate").click()
    reference = shipped()  # beam as the model card records it: the page's settings
    expected = reference.translate(SENTENCE, max_length=64, **recorded(reference))
    expect(page.locator("#translation textarea")).to_have_value(expected.text, timeout=TIMEOUT)
    live = page.locator("#live-attention")
    live.locator("select.ae-kind").select_option("decoder_self")
    live.locator("select.ae-layer").select_option("1")
    live.locator("select.ae-head").select_option("3")
    page.get_by_role("button", name="Copy link to this view").click()
    expect(page.locator("#link textarea, #link input").first).to_have_value(
        re.compile(r"text=Two\+dogs.*strategy=beam.*kind=decoder_self&layer=2&head=4"), timeout=TIMEOUT)
    link = page.locator("#link textarea, #link input").first.input_value()
    assert page.url == link  # the address bar holds it too
    page.close()
    shared = browser.new_page(viewport={"width": 1400, "height": 900})
    shared.goto(link)
    expect(shared.locator("#translation textarea")).to_have_value(expected.text, timeout=TIMEOUT)
    shared.locator("#live-attention .ae-heatmap").wait_for(timeout=TIMEOUT)
    assert state(shared) == {"kind": "decoder_self", "layer": 1, "head": 3, "mode": "heatmap", "step": None}
    assert shared.locator("#source textarea").input_value() == SENTENCE
    shared.close()


def test_a_bad_link_names_the_bad_parameter(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(server_url + "?text=A+dog.&layer=9")
    layers = shipped().model.config.n_layers
    expect(page.locator("[data-testid='toast-body']").first).to_contain_text(
        f"layer in the link must be in [1, {layers}], got 9", timeout=TIMEOUT)
    page.close()


def test_an_input_error_leaves_the_last_good_result(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    page = translated_page(browser, server_url, 1400, 900)
    good = page.locator("#translation textarea").input_value()
    page.get_by_label("Source text").fill("   ")
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#translate-error [role=alert]")).to_contain_text("Source text is empty", timeout=TIMEOUT)
    assert page.locator("#translation textarea").input_value() == good
    assert page.locator("#live-attention .ae-heatmap").count() == 1  # the picture stays too
    assert page.get_by_text("Error", exact=True).count() == 0  # no error badges over the outputs
    page.close()


def test_sampling_shows_its_seed_and_offers_a_new_one(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    page = translated_page(browser, server_url, 1400, 900)
    page.get_by_text("Decoding settings").click()
    page.get_by_role("radio", name="sampling").check()
    expect(page.locator("#setting-beam-beam_size")).to_be_hidden(timeout=TIMEOUT)  # only the chosen strategy's settings
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#summary")).to_contain_text("seed 0", timeout=TIMEOUT)
    page.get_by_role("button", name="New seed, run again").click()
    # the new seed lands in its control first, then the translation runs with it
    expect(page.locator("#setting-sample-seed input")).not_to_have_value("0", timeout=TIMEOUT)
    seed = int(page.locator("#setting-sample-seed input").input_value())
    expect(page.locator("#summary")).to_contain_text(re.compile(rf"seed {seed}\b"), timeout=TIMEOUT)
    expected = shipped().translate(SENTENCE, strategy="sample", seed=seed, max_length=64)
    expect(page.locator("#translation textarea")).to_have_value(expected.text, timeout=TIMEOUT)
    page.close()
