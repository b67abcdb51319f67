"""WCAG 2.1 AA as axe-core measures it (tests/vendor/axe-core, 4.14.1, its WCAG 2.0/2.1 A and AA rules) on every screen:
the first screen before and after a translation (then with the live picture's Data table open, and its lines), every
tab after it, and the walk-through at its first, middle and last stage; light and dark, at 1400 px and at 390 px. On
each screen, Chromium's accessibility tree (Playwright's ARIA snapshot) must also name every group, radio group and
button, and the page's text must name no folder of the server's machine. Every violation is printed with its
elements; the test passes only with none, and with no error in the page or the server's log (docs/accessibility.md)."""
import json
import re
import time

import pytest

from .app_server import ServerLog
from .conftest import ROOT
from .test_browser import CHROMIUM, browser, open_page, server_url, translate  # noqa: F401
from .test_browser_clicks import ERRORS_JS, idle, log_errors

# beside_others: scripts/test.sh runs this walk (about 2 min alone) in the other tests' lane, which ends sooner
pytestmark = [pytest.mark.browser, pytest.mark.beside_others,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
SENTENCE = "Where is the train station?"
# the whole document, or only the open tab's panel (the rest of the page was checked on the first screen, and axe's
# time grows with every element it visits, hidden panels included)
AXE_JS = """async (panel) => {
  const open = [...document.querySelectorAll('[role=tabpanel]')].find(p => p.offsetParent !== null);
  const rules = {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
                 resultTypes: ['violations'], iframes: false};
  const result = await axe.run(panel && open ? open : document, rules);
  return result.violations.map(v => ({rule: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary.replace(/\\s+/g, ' '))}));
}"""
# a folder of the server's machine in the page's text (a model's path in a message, a card or a log line)
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:root|home|tmp|work|Users)/[^\s]*")
# a group, radio group or button with nothing after its role but the end, its children's colon or its states
UNNAMED = re.compile(r"^\s*- (group|radiogroup|button)(:|\s*\[[^\]]*\])*\s*:?\s*$")


def unnamed_controls(snapshot: str) -> list[str]:
    """The groups (a radio or checkbox group's fieldset), radio groups and buttons that have no accessible name in
    an ARIA snapshot (Playwright's YAML: a named one reads `- button "Translate"`, an unnamed one `- button`,
    `- group:` or `- button [disabled]`)."""
    return [line.strip() for line in snapshot.splitlines() if UNNAMED.match(line)]


def violations(page, panel: bool = False) -> list[dict]:
    """axe-core's WCAG A/AA violations on the page as it is now, or in its open tab's panel (the script added once
    per page), and, as one more rule, every control the accessibility tree leaves unnamed there (Chromium's tree, as
    a screen reader gets it, read through Playwright's ARIA snapshot)."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate(AXE_JS, panel)
    where = page.locator("[role=tabpanel]:visible").first if panel else page.locator("body")
    unnamed = unnamed_controls(where.aria_snapshot(timeout=30_000))
    if unnamed:
        found.append({"rule": "unnamed-control", "impact": "serious", "nodes": unnamed,
                      "help": "Every group, radio group and button has an accessible name (WCAG 1.3.1, 4.1.2)"})
    # not accessibility, but read on the same screens: no text the page shows names a folder of the server's machine
    paths = MACHINE_PATH.findall(page.evaluate("() => document.body.innerText"))
    if paths:
        found.append({"rule": "machine-path", "impact": "serious", "nodes": paths,
                      "help": "No page shows a path of the server's machine"})
    return found


def walk_screens(page):
    """The walk-through at its first, middle and last stage: (name, page) as each is shown."""
    page.locator("#walk-open").click()
    page.locator("#walkthrough .wk-stage").wait_for(timeout=30_000)
    stages = page.locator("#walkthrough select.wk-list option").evaluate_all("options => options.map(o => o.value)")
    for where, value in (("first", stages[0]), ("middle", stages[len(stages) // 2]), ("last", stages[-1])):
        page.locator("#walkthrough select.wk-list").select_option(value)
        page.locator(f"#walkthrough .wk-walk[data-stage='{value}']").wait_for(timeout=30_000)
        yield f"walk-through, {where} stage ({value} of {len(stages)})", page


@pytest.mark.parametrize("scheme,width", [("light", 1400), ("dark", 1400), ("light", 390), ("dark", 390)])
def test_no_wcag_violation_on_any_screen(browser, server_url, scheme, width):  # noqa: F811
    found = {}
    with ServerLog() as log:
        # the first screen, then the same page translated (as open_translated translates a page it opens)
        page = open_page(browser, server_url + f"?__theme={scheme}", width, 900, color_scheme=scheme)
        found["first screen"] = violations(page)
        translate(page, SENTENCE)
        idle(page)
        found["first screen, translated"] = violations(page)
        page.locator("#live-attention details.ae-data summary").click()  # the live picture's numbers as a table
        page.locator("#live-attention .ae-data-table").wait_for()
        found["first screen, the Data table open"] = violations(page)
        page.locator("#live-attention .ae-mode[data-mode=lines]").click()
        page.locator("#live-attention .ae-lines").wait_for()
        found["first screen, the live picture's lines"] = violations(page)
        page.locator("#live-attention .ae-mode[data-mode=heatmap]").click()
        tabs = page.locator("[role=tab]").all_inner_texts()
        assert len(tabs) >= 15, tabs
        for tab in tabs:
            began = time.monotonic()
            page.get_by_role("tab", name=tab, exact=True).click()
            idle(page)
            drawn = time.monotonic()
            found[f"tab {tab}"] = violations(page, panel=True)
            print(f"tab {tab}: drawn in {drawn - began:.1f} s, checked in {time.monotonic() - drawn:.1f} s")
            if tab == "How it computed this":
                found |= {name: violations(shown, panel=True) for name, shown in walk_screens(page)}
        errors = page.evaluate(ERRORS_JS)
        page.close()
    report = {screen: found_here for screen, found_here in found.items() if found_here}
    print(f"{scheme}, {width} px: {len(found)} screens, {sum(map(len, report.values()))} violations")
    print(json.dumps(report, indent=1, ensure_ascii=False))
    assert len(found) >= 22, list(found)  # the first screen four ways, every tab, three walk-through stages
    assert not report, f"{scheme}, {width} px: violations on {sorted(report)}"
    assert errors == {"toasts": [], "components": []}, errors
    assert log_errors(log.text.getvalue().splitlines()) == []
