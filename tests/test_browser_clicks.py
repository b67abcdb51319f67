"""Every click a visitor can make in every tab after a translation, in the browser: each Gradio button and each
Radio option (a few per group: a sentence's token chips are many) once when the page is idle, then in pairs, the
second while the first one's event still runs. No click may leave an error toast, a component in its error state, or
an error in the server's log, except the messages below, which tell the visitor what to do first.

Not clicked: Gradio's own icon buttons (copy, fullscreen, reset, a plot's toolbar), accordions, the links of
exported files (a download; tests/test_browser.py saves one), and the buttons a custom HTML view draws itself (the
walk-through's: tests/test_browser_walkthrough.py)."""
import re
import sys
import threading
import time
import traceback

import pytest

from .app_server import ServerLog
from .test_browser import CHROMIUM, TIMEOUT, browser, open_translated, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "The dog is sleeping."
OPTIONS_PER_GROUP = 3  # Radio options clicked per group (the first ones): enough to change each control twice
# The error toasts a click after a translation may give: each names what the visitor must do first, as gr.Error
# (explorer/text.py's page_error); the same text ends the server log's traceback of it. Nothing else is allowed.
ALLOWED = (
    "Choose one of the nearest corpus tokens first.",  # Atlas: "Open this sentence" before choosing a neighbour
    "Choose another candidate or type a continuation first.",  # Step by step: "Continue from here" with none
    "Choose a candidate to compare with first.",  # Step by step: "Why?" with no candidate chosen
    "Corrupted sentence: it is empty; type one, or choose noise on a source piece.",  # Cause, before one is typed
    "Find the cause first, then save it.",  # Cause: "Save this tab" before any picture
    "Source piece: choose the piece to replace first.",  # Cause: the picker's button before a piece is chosen
    "Held cell: click a cell of a picture first, or type one.",  # Cause: "Translate with it held" with none
    "Latent: choose one first (a button beside a token, or type its number).",  # Features: steering with none chosen
)
BUTTONS = "button.primary, button.secondary, button.stop"  # Gradio's Button components (a variant each)
OPTIONS = "label[data-testid$='-radio-label']"
# How long one click's events may run: in one CI run of the whole suite (2 cores, the other tests beside this one) a
# click's events were still running after 30 s, and which one was not recorded; a hang never ends, so this only spares
# slow machines, and a timeout now names the components still waiting and the server's threads (idle)
IDLE_TIMEOUT = 90_000
# the open tab's panel; a page is idle when every status tracker is hidden (its event ended) or shows an error
PANEL = "[role=tabpanel]:not([hidden])"
SELECTED_JS = """() => [...document.querySelectorAll('[role=tab]')]
  .filter(t => t.getAttribute('aria-selected') === 'true').map(t => t.innerText.trim())"""
IDLE_JS = """() => [...document.querySelectorAll("[data-testid='status-tracker']")].every(tracker =>
  tracker.classList.contains('hide') || tracker.querySelector('.error')?.innerText.trim())"""
BUSY_JS = """() => [...document.querySelectorAll("[data-testid='status-tracker']")].filter(tracker =>
  !(tracker.classList.contains('hide') || tracker.querySelector('.error')?.innerText.trim()))
  .map(tracker => (tracker.closest('[id]')?.id || '?') + ': ' + tracker.innerText.trim().slice(0, 80))"""
ERRORS_JS = """() => ({
  toasts: [...document.querySelectorAll("[data-testid='toast-body'].error")].map(t => t.innerText.trim()),
  components: [...document.querySelectorAll("[data-testid='status-tracker'] .error")]
    .filter(e => e.innerText.trim())
    .map(e => (e.closest('[id]')?.id || '?') + ': ' + e.innerText.trim()),
})"""


@pytest.fixture(autouse=True)
def short_training():
    """The Learn tab's Train stopped by its time cap after its first update, and Play's frames without the pause a
    reader gets between them: the test clicks them, not waits for them."""
    from explorer.views import learn, steps

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learn, "APP_TIME_CAP", 0.1)
        patch.setattr(steps, "PLAY_DELAY_S", 0.01)
        yield


def idle(page) -> None:
    """Waits until no event of the page is running, twice in a row 50 ms apart (a chained event starts after). On a
    timeout, the error names the components still waiting and what the server's threads are doing."""
    try:
        page.wait_for_function(IDLE_JS, timeout=IDLE_TIMEOUT)
        time.sleep(0.05)
        page.wait_for_function(IDLE_JS, timeout=IDLE_TIMEOUT)
    except Exception as error:
        raise AssertionError(f"the page never went idle: {error}\nstill running: {page.evaluate(BUSY_JS)}\n"
                             f"{server_threads()}") from error


def server_threads() -> str:
    """The stack of every thread of this process (the app's server runs in it) in the project's own code."""
    frames = sys._current_frames()
    lines = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident)
        stack = [entry for entry in traceback.extract_stack(frame) if "/explorer/" in entry.filename
                 or "/transformer/" in entry.filename] if frame else []
        if stack:
            lines.append(f"thread {thread.name}: " + " <- ".join(
                f"{entry.filename.rsplit('/', 1)[-1]}:{entry.lineno} {entry.name}" for entry in reversed(stack)))
    return "\n".join(lines) or "no thread in the project's code"


class Errors:
    """What the page shows as errors after each click: error toasts (closed once read) and components in their error
    state. An allowed message puts its event's outputs in the error state too, until an event updates them: those
    are explained, and a component already in the error state is reported only when it goes there anew."""

    def __init__(self, page):
        self.page, self.components = page, set()

    def after(self, click: str) -> list[str]:
        found = self.page.evaluate(ERRORS_JS)
        self.page.evaluate("() => document.querySelectorAll(\"[data-testid='toast-body'] button\")"
                           ".forEach(button => button.click())")
        toasts = [text for text in found["toasts"] if not any(allowed in text for allowed in ALLOWED)]
        new = set(found["components"]) - self.components
        self.components = set(found["components"])
        explained = len(toasts) < len(found["toasts"])  # an allowed message came with this click
        return [f"{click}: toast {text!r}" for text in toasts] + (
            [] if explained else [f"{click}: component in error state: {where}" for where in sorted(new)])


def log_errors(lines: list[str]) -> list[str]:
    """The server log's errors: every traceback, warning-or-worse record and 'Error'/'Exception' line, except the
    tracebacks of an allowed gr.Error (they end in `gradio.exceptions.Error: <message>`)."""
    found, block = [], []
    for line in lines + [""]:
        if line.startswith("Traceback") or (block and (line.startswith(" ") or not line or "above exception" in line
                                                       or line.startswith("During handling"))):
            block.append(line)
            continue
        if block:  # `line` is the exception that ends the traceback
            message = line.removeprefix("gradio.exceptions.Error: ")
            if not (line.startswith("gradio.exceptions.Error: ") and message.strip("'\"") in ALLOWED):
                found.append("\n".join(block + [line]))
            block = []
        elif re.search(r"Traceback|Exception|Error|CRITICAL", line):
            found.append(line)
    return found


def clickables(page, tab: str) -> list[tuple[str, object]]:
    """The open tab's visible, enabled buttons and the first options of each Radio group, with a name each. The
    tab's panel is marked with the tab's name, so that the locators stay in it when another tab opens."""
    page.locator(PANEL).last.evaluate("(panel, tab) => panel.setAttribute('data-clicked-tab', tab)", tab)
    panel = page.locator(f"[data-clicked-tab={tab!r}]")
    found = []
    for index in range(panel.locator(BUTTONS).count()):
        button = panel.locator(BUTTONS).nth(index)
        if button.is_visible() and button.is_enabled():
            found.append((f"button {button.inner_text().strip()!r}", button))
    groups = panel.locator("fieldset")
    for group_index in range(groups.count()):
        options = groups.nth(group_index).locator(OPTIONS)
        for index in range(min(options.count(), OPTIONS_PER_GROUP)):
            option = options.nth(index)
            if option.is_visible() and option.locator("input").is_enabled():
                found.append((f"option {option.inner_text().strip()!r}", option))
    return found


def reopened(page, tab: str, target, seconds: float = 20) -> None:
    """Opens `tab` again until `target` shows: a jump an earlier click started (Step by step's "Show this step in
    the logit lens") may open its own tab after this one was reopened, when its event chain ends. Raises naming the
    tab that stays open otherwise."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        page.get_by_role("tab", name=tab, exact=True).click()
        idle(page)
        page.wait_for_timeout(250)
        if target.is_visible():
            return
    shown = page.evaluate(SELECTED_JS)
    raise AssertionError(f"still hidden after {seconds} s of reopening {tab!r}; the open tab: {shown}")


def click(page, tab: str, name: str, target, problems: list[str], reopen: bool = True, tries: int = 3) -> None:
    """Clicks `target` in `tab`, opened again if an earlier click went to another tab; not at all when `reopen` is
    False (the click before it opens another tab, now or while this one waits: a visitor could not click it
    either). A jump an earlier click started may open its tab during the click: the tab is reopened and the click
    tried again, `tries` times in all; a control still not clickable then is a problem."""
    for attempt in range(1, tries + 1):
        try:
            if not target.is_visible():
                if not reopen:
                    return
                reopened(page, tab, target)
            target.click(timeout=5_000)
            return
        except Exception as error:  # noqa: BLE001 - a control that vanished mid-test is reported with the others
            if not reopen and not target.is_visible():  # the first click's tab opened while this one waited
                return
            if attempt == tries:
                problems.append(f"{tab}: {name} could not be clicked in {tries} tries: {str(error)[-600:]}")


# every PARTS-th tab, on a page of its own: the whole walk took over a minute on one page (one part of three 46 s); each
# tab's clicks begin with the tab opened again, so a tab's clicks do not depend on the tabs walked before it
PARTS = 4


@pytest.mark.parametrize("part", range(PARTS), ids=lambda part: f"tabs {part + 1}, {part + 1 + PARTS}, ...")
def test_every_click_in_every_tab_answers_without_an_error(browser, server_url, part):  # noqa: F811
    page = open_translated(browser, server_url, SENTENCE)
    problems, errors = [], Errors(page)
    with ServerLog() as log:
        tabs = page.get_by_role("tab")
        names = [tabs.nth(index).inner_text().strip() for index in range(tabs.count())]
        assert len(names) >= 15, names
        for tab in names[part::PARTS]:
            page.get_by_role("tab", name=tab, exact=True).click()
            idle(page)
            targets = clickables(page, tab)
            for name, target in targets:  # one at a time, each after the last event ended
                click(page, tab, name, target, problems)
                idle(page)
                problems += errors.after(f"{tab}: {name}")
            for (first, first_target), (second, second_target) in zip(targets[::2], targets[1::2]):
                click(page, tab, first, first_target, problems)  # the second while the first one's event runs
                click(page, tab, second, second_target, problems, reopen=False)
                idle(page)
                problems += errors.after(f"{tab}: {first} then {second}")
    page.close()
    problems += [f"server log: {error}" for error in log_errors(log.lines())]
    assert not problems, "\n".join(problems)
