"""The page's Translate through the JSON route (explorer/page_translate.py, static/translate_request.js): the browser
posts the controls to POST api/v1/translate and shows its answer itself, without Gradio's queue; the result is
adopted and the open tab drawn after the live picture, other tabs when opened; a refused request is said as text and
the last good result stays."""
import html

import pytest

from .app_server import ServerLog
from .conftest import recorded, shipped
from .test_browser import CHROMIUM, TIMEOUT, browser, open_page, plot_data, server_url, wait_for_plot  # noqa: F401
from .test_browser_clicks import ERRORS_JS, idle, log_errors

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
FIRST = "Two dogs are running through the snow."
SECOND = "A woman is reading a book in the park."

# Set up before a Translate: the moment (performance.now()) the page first shows `text` in the translation box and a
# live picture whose columns are `columns` (the source pieces), drawn; a MutationObserver sees the drawing's last
# change as it happens, and resource timing lists every request the page started since, with its start time (a
# request started before, such as the queue's event stream the page's load opened, may end and be listed later).
WATCH_JS = """([text, columns]) => {
  performance.clearResourceTimings();
  performance.setResourceTimingBufferSize(1000);
  window.__shownAt = null;
  window.__watchedFrom = performance.now();
  const shown = () => {
    const box = document.querySelector('#translation textarea');
    const live = document.querySelector('#live-attention .ae-live');
    if (!box || box.value !== text || !live || live.dataset.pending || !live.querySelector('.ae-heatmap')) return false;
    const labels = [...live.querySelectorAll('.ae-col-label')].map(label => label.textContent);
    return JSON.stringify(labels) === JSON.stringify(columns);
  };
  const observer = new MutationObserver(() => {
    if (shown()) { window.__shownAt = performance.now(); observer.disconnect(); }
  });
  observer.observe(document.body, {subtree: true, childList: true, attributes: true});
}"""
REQUESTS_JS = """() => performance.getEntriesByType('resource').filter(e => e.startTime >= window.__watchedFrom)
  .map(e => ({url: e.name, start: e.startTime}))"""


@pytest.fixture(scope="module")
def reference():
    return shipped()


def expected(reference, text):
    return reference.translate(text, capture=True, **recorded(reference))


def sentence_choice(page) -> str:
    return page.locator("#sentence input").input_value()


def translate_and_watch(page, reference, text, press):
    """Translates `text` (`press`: "click" the button, or "submit" in the source box) and returns (what the page
    requested from the click until the result was adopted and the open tab drawn, the requests that started before
    the translation and the live picture showed)."""
    from playwright.sync_api import expect

    want = expected(reference, text)
    idle(page)  # no event of the page's load or of the last Translate still running
    page.get_by_label("Source text").fill(text)
    page.evaluate(WATCH_JS, [want.text, want.src_tokens])
    sent = []

    def listen(request):
        sent.append(request.url)

    page.on("request", listen)
    if press == "click":
        page.get_by_role("button", name="Translate").click()
    else:  # the source box takes a sentence per line: Shift+Enter submits it (Gradio's multi-line Textbox)
        page.get_by_label("Source text").press("Shift+Enter")
    expect(page.locator("#translation textarea")).to_have_value(want.text, timeout=TIMEOUT)
    page.wait_for_function("() => window.__shownAt !== null", timeout=TIMEOUT)
    # then the result adopted (the sentence picker names the new translation) and the open tab (Step by step) drawn
    expect(page.locator("#sentence input")).to_have_value(f"1: {want.text[:60]}", timeout=TIMEOUT)
    expect(page.locator("#step-text")).to_contain_text(f"of {len(want.tgt_ids)}", timeout=TIMEOUT)
    shown_at = page.evaluate("() => window.__shownAt")
    before = [entry["url"] for entry in page.evaluate(REQUESTS_JS) if entry["start"] < shown_at]
    page.remove_listener("request", listen)
    return sent, before, want


def test_translate_goes_through_the_json_route_and_never_the_queue(browser, server_url, reference):  # noqa: F811
    from playwright.sync_api import expect

    with ServerLog() as log:
        page = open_page(browser, server_url)
        for text, press in ((FIRST, "click"), (SECOND, "submit")):
            sent, before, want = translate_and_watch(page, reference, text, press)
            assert not [url for url in sent if "/queue/join" in url], sent  # nothing of Translate waits in the queue
            assert [url for url in sent if url.endswith("/api/v1/translate")] != [], sent
            # the route is asked first; the adoption's one unqueued event (run/predict) follows its answer
            route_at = [index for index, url in enumerate(sent) if url.endswith("/api/v1/translate")][0]
            assert not [url for url in sent[:route_at] if "/gradio_api/" in url], sent
            assert not [url for url in before if "/gradio_api/" in url and "/run/predict" not in url], before
            summary = page.locator("#summary")
            expect(summary).to_contain_text("1 sentence(s) translated in")
            expect(page.locator("#translate-error")).to_have_text("")
            assert page.evaluate(ERRORS_JS) == {"toasts": [], "components": []}
            assert page.locator("#live-attention .ae-row-label").all_text_contents() == want.tgt_tokens
        page.close()
    assert not log_errors(log.lines()), log.lines()


def test_a_tab_opened_after_translate_draws_that_result(browser, server_url, reference):  # noqa: F811
    from playwright.sync_api import expect

    with ServerLog() as log:
        page = open_page(browser, server_url)
        for text in (FIRST, SECOND):  # the second result replaces the first in the tabs too
            translate_and_watch(page, reference, text, "click")
            want = expected(reference, text)
            page.get_by_role("tab", name="Attention").click()
            page.wait_for_function(
                "(pieces) => { const p = document.querySelector('#attention-plot .js-plotly-plot');"
                " return p && p.data && p.data.length > 0 && JSON.stringify(p.data[0].x.map(t => String(t)"
                ".replace(/[\u200b\u200c]/g, ''))) === JSON.stringify(pieces); }",
                arg=[html.escape(piece, quote=False) for piece in want.src_tokens],  # plotly's labels: text, escaped
                timeout=TIMEOUT)
            assert "Cross-attention" in plot_data(page, "#attention-plot")["title"]
            page.get_by_role("tab", name="Tokens").click()
            expect(page.locator("#source-tokens")).to_contain_text(want.src_tokens[1], timeout=TIMEOUT)
            page.get_by_role("tab", name="Step by step").click()  # the tab translate_and_watch finds drawn
        page.close()
    assert not log_errors(log.lines()), log.lines()


@pytest.mark.parametrize("control, value, message", [
    ("source", "x" * 2001, "Source text has 2,001 characters; the limit is 2,000 per request."),
    ("heads-off", "cross 9 1", "heads_off entry 'cross 9 1' is out of range"),
    ("heads-off", '<img src=x onerror="window.__xss=1"><b>bold</b> 1 1', "heads_off entry '<img src=x onerror="),
])
def test_a_refused_translate_says_why_as_text_and_keeps_the_last_result(  # noqa: F811
        browser, server_url, reference, control, value, message):  # noqa: F811
    from playwright.sync_api import expect

    with ServerLog() as log:
        page = open_page(browser, server_url)
        translate_and_watch(page, reference, FIRST, "click")
        translation = page.locator("#translation textarea").input_value()
        summary = page.locator("#summary").inner_text()
        sentence, picture = sentence_choice(page), page.locator("#live-attention .ae-live").get_attribute("data-state")
        if control == "heads-off":
            page.get_by_text("Decoding settings").click()
            page.locator("#heads-off input, #heads-off textarea").first.fill(value)
        else:
            page.get_by_label("Source text").fill(value)
        page.get_by_role("button", name="Translate").click()
        alert = page.locator("#translate-error [role=alert]")
        expect(alert).to_contain_text(message, timeout=TIMEOUT)
        assert value in alert.inner_text() or control == "source"  # the visitor's text, as text
        assert page.evaluate("() => window.__xss") is None and page.locator("#translate-error img, #translate-error b"
                                                                           ).count() == 0
        page.wait_for_timeout(300)  # nothing else arrives after the message
        assert page.locator("#translation textarea").input_value() == translation
        assert page.locator("#summary").inner_text() == summary and sentence_choice(page) == sentence
        assert page.locator("#live-attention .ae-live").get_attribute("data-state") == picture
        assert page.evaluate(ERRORS_JS) == {"toasts": [], "components": []}  # no toast, no output in its error state
        # fixed, the next Translate shows and clears the message
        if control == "heads-off":
            page.locator("#heads-off input, #heads-off textarea").first.fill("")
        translate_and_watch(page, reference, SECOND, "click")
        expect(alert).to_have_text("")
        page.close()
    assert not log_errors(log.lines()), log.lines()


def test_a_lost_server_is_said_and_the_last_result_stays(browser, server_url, reference):  # noqa: F811
    """A network failure (the route aborted in the browser) and a full server (a 503 with Retry-After, as
    http_api.py answers it) are said in the alert box; the translation stays."""
    from playwright.sync_api import expect

    page = open_page(browser, server_url)
    translate_and_watch(page, reference, FIRST, "click")
    translation = page.locator("#translation textarea").input_value()
    alert = page.locator("#translate-error [role=alert]")
    page.route("**/api/v1/translate", lambda route: route.abort())
    page.get_by_label("Source text").fill(SECOND)
    page.get_by_role("button", name="Translate").click()
    expect(alert).to_contain_text("Could not reach the server", timeout=TIMEOUT)
    assert page.locator("#translation textarea").input_value() == translation
    page.unroute("**/api/v1/translate")
    busy = '{"error": {"field": null, "message": "The server is busy <now>: try again in 2 s."}}'
    page.route("**/api/v1/translate", lambda route: route.fulfill(status=503, body=busy, headers={
        "Content-Type": "application/json", "Retry-After": "2"}))
    page.get_by_role("button", name="Translate").click()
    expect(alert).to_have_text("The server is busy <now>: try again in 2 s.", timeout=TIMEOUT)
    assert page.locator("#translation textarea").input_value() == translation
    page.unroute("**/api/v1/translate")
    page.close()


def test_the_later_of_two_translates_is_shown(browser, server_url, reference):  # noqa: F811
    """Two Translates in flight: the one pressed last is shown, even when the earlier one's answer comes after."""
    from playwright.sync_api import expect

    page = open_page(browser, server_url)
    held = []
    page.route("**/api/v1/translate", lambda route: held.append(route) if not held else route.continue_())
    page.get_by_label("Source text").fill(FIRST)
    page.get_by_role("button", name="Translate").click()
    while not held:  # the first Translate's request, held back
        page.wait_for_timeout(20)
    page.get_by_label("Source text").fill(SECOND)
    page.get_by_role("button", name="Translate").click()
    want = expected(reference, SECOND)
    expect(page.locator("#translation textarea")).to_have_value(want.text, timeout=TIMEOUT)
    expect(page.locator("#sentence input")).to_have_value(f"1: {want.text[:60]}", timeout=TIMEOUT)
    held[0].continue_()  # the first Translate's answer, late
    page.wait_for_timeout(1500)
    assert page.locator("#translation textarea").input_value() == want.text
    assert sentence_choice(page) == f"1: {want.text[:60]}"
    page.unroute("**/api/v1/translate")
    page.close()


def test_a_shared_link_then_translate(browser, server_url, reference):  # noqa: F811
    """A link opens translated (its own load event), and the page's Translate then replaces its result."""
    from urllib.parse import quote

    from playwright.sync_api import expect

    with ServerLog() as log:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(f"{server_url}?text={quote(FIRST)}&kind=encoder_self")
        expect(page.locator("#translation textarea")).to_have_value(expected(reference, FIRST).text, timeout=TIMEOUT)
        page.locator("#live-attention .ae-heatmap").wait_for(timeout=TIMEOUT)
        translate_and_watch(page, reference, SECOND, "click")
        page.close()
    assert not log_errors(log.lines()), log.lines()
