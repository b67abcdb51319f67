"""The Learn tab in the browser, at 390 px in dark mode: opened, it shows the default reverse run's replay at once;
Train (a short run of a width-16 model) redraws the curve and the probe's attention as it trains and ends with a
share link; the shipped default run opened again (the README's picture, at 1280 px) and scrubbed back to its first
snapshot shows the untrained model's step. No component shows an error and the server logs no traceback."""
import re

import pytest

from .app_server import ServerLog
from .test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT, browser, open_page, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
# the Train event ended: every status tracker hidden, or in its error state (which the test then reports)
ENDED_JS = """() => [...document.querySelectorAll("[data-testid='status-tracker']")].every(tracker =>
  tracker.classList.contains('hide') || tracker.querySelector('.error'))"""
TITLE_JS = "() => document.querySelector('#learn-attention .js-plotly-plot')?.layout?.title?.text || ''"


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def test_train_live_then_scrub_the_replay(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    with ServerLog() as log:
        page = open_page(browser, server_url, width=390, height=900, color_scheme="dark")
        page.get_by_role("tab", name="Learn").click()
        expect(page.locator("#learn-status")).to_contain_text("default run", timeout=TIMEOUT)
        page.wait_for_function(f"() => ({TITLE_JS})().startsWith('Step 800')", timeout=TIMEOUT)

        for elem_id, value in (("learn-layers", 1), ("learn-width", 16), ("learn-steps", 40)):
            set_number(page, elem_id, value)
        titles = []
        page.expose_function("seeTitle", lambda title: titles.append(title))
        page.evaluate("""() => new MutationObserver(() => {
            const p = document.querySelector('#learn-attention .js-plotly-plot');
            if (p && p.layout) window.seeTitle(p.layout.title.text); }).observe(
            document.querySelector('#learn-attention'), {subtree: true, childList: true})""")
        page.locator("#learn-train").click()
        expect(page.locator("#learn-status")).to_contain_text("Trained.", timeout=TIMEOUT)
        # redrawn while it trained: the untrained model's step, a middle one, and the last
        steps = {title.split(":")[0] for title in titles}
        assert {"Step 0", "Step 20", "Step 40"} <= steps, titles
        expect(page.locator("#learn-prediction")).to_contain_text("What it predicts now")
        expect(page.locator("#learn-link textarea, #learn-link input")).to_have_value(
            re.compile(r"\?learn=[0-9a-f]{12}$"))

        # the shipped replay: the default run, opened with no training, then scrubbed back to its first snapshot
        page.set_viewport_size({"width": 1280, "height": 1500})  # the README's picture
        page.locator("#learn-default").click()
        page.wait_for_function(f"() => ({TITLE_JS})().startsWith('Step 800')", timeout=TIMEOUT)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.evaluate("() => document.querySelector('#learn-prediction').scrollIntoView()")
        page.screenshot(path=str(SCREENSHOTS / "learn.png"), full_page=False)
        set_number(page, "learn-scrub", 0)
        page.wait_for_function(f"() => ({TITLE_JS})().startsWith('Step 0:')", timeout=TIMEOUT)
        expect(page.locator("#learn-prediction")).to_contain_text("exact match on held-out examples 0%")
        assert page.locator("#learn-curve .js-plotly-plot").count() == 1
        assert page.locator("[data-testid='toast-body']").count() == 0
        assert page.locator("[data-testid='status-tracker'] .error").count() == 0
        page.close()
    assert not [line for line in log.lines() if "Traceback" in line], log.lines()


def test_stop_right_after_train_stops_the_run_and_shows_no_error(browser, server_url):  # noqa: F811
    """Stop pressed at once or a moment after Train, eight times: each run stops, before its first step or at the
    step it reached, and says so; no component is left in its error state (Gradio's own cancel of the Train event,
    used before, left them so in about 1 of 6 such pairs)."""
    from playwright.sync_api import expect

    with ServerLog() as log:
        page = open_page(browser, server_url)
        page.get_by_role("tab", name="Learn").click()
        expect(page.locator("#learn-status")).to_contain_text("default run", timeout=TIMEOUT)
        for delay in (0, 20, 60, 120, 200, 300, 600, 1200):
            page.locator("#learn-train").click()
            page.wait_for_timeout(delay)
            page.locator("#learn-stop").click()
            page.wait_for_function(ENDED_JS, timeout=TIMEOUT)
            status = page.locator("#learn-status [data-testid=markdown]").inner_text().strip()
            assert re.fullmatch(r"Stopped (before its first step|at step \d+: the run's process ended)\.", status), (
                delay, status)
            assert page.locator("[data-testid='status-tracker'] .error").count() == 0, delay
        page.close()
    assert not [line for line in log.lines() if "Traceback" in line], log.lines()
