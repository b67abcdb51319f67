"""Every tab by keyboard alone, and every figure's text alternative against the numbers it draws (WCAG 2.1 AA 1.1.1,
2.1.1, 2.1.2; docs/accessibility.md): each tab opened with Enter and walked with Tab until focus leaves it, every
visible control reached on the way; the live picture's cells and tokens by the arrow keys, what they reach announced;
the search tree's nodes and the walk-through's Next by Enter; each plotly figure's name and Data table read back
against the figure's own numbers, and the live picture's against its cells."""
import re

import numpy as np
import pytest

from .app_server import ServerLog
from .test_browser import CHROMIUM, TIMEOUT, browser, open_translated, server_url  # noqa: F401
from .test_browser_clicks import ERRORS_JS, idle, log_errors

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "Where is the train station?"
# the open panel's controls a keyboard should reach, each numbered (data-kb): visible, enabled, not inside a closed
# disclosure (its summary is the control)
CONTROLS_JS = """() => {
  const open = [...document.querySelectorAll('[role=tabpanel]')].find(p => p.offsetParent !== null);
  const wanted = 'button, input, select, textarea, a[href], summary, [tabindex]:not([tabindex="-1"])';
  // a table's cells and their buttons are reached by the arrow keys once the table has the focus (Gradio's
  // dataframe draws its body as div role=grid, and a cell's Select row / Select column buttons and its menu as
  // the cell is focused): the table is one stop
  const shown = e => !e.disabled && e.getClientRects().length && getComputedStyle(e).visibility !== 'hidden' &&
    !(e.tagName !== 'SUMMARY' && e.closest('details:not([open])')) && !e.closest('table, [role=grid], [role=menu]');
  // a radio group is one stop (the arrow keys move within it): its radios share one number
  const groups = new Map(), controls = [];
  for (const e of [...open.querySelectorAll(wanted)].filter(shown)) {
    const group = e.type === 'radio' && e.name ? e.name : null;
    if (group && groups.has(group)) { e.dataset.kb = groups.get(group); continue; }
    e.dataset.kb = String(controls.length);
    if (group) groups.set(group, e.dataset.kb);
    controls.push(e);
  }
  return controls.map(e => `${e.tagName.toLowerCase()} in #${(e.closest('[id]') || {}).id}: ` +
                           (e.getAttribute('aria-label') || e.innerText || e.value || '').slice(0, 40));
}"""
FOCUS_JS = """() => {
  const e = document.activeElement, open = [...document.querySelectorAll('[role=tabpanel]')]
    .find(p => p.offsetParent !== null);
  return {kb: e && e.dataset ? e.dataset.kb ?? null : null, inside: !!(open && e && open.contains(e))};
}"""
PRESENT_JS = """() => [...[...document.querySelectorAll('[role=tabpanel]')].find(p => p.offsetParent !== null)
  .querySelectorAll('[data-kb]')].map(e => e.dataset.kb)"""
# every plotly figure of the open panel has its Data table beside it (figure_text.js's scan has run since it was drawn)
DESCRIBED_JS = """() => [...[...document.querySelectorAll('[role=tabpanel]')].find(p => p.offsetParent !== null)
  .querySelectorAll('.js-plotly-plot')].every(gd => gd.nextElementSibling?.classList.contains('ae-data'))"""
# every plotly figure of the open panel: its name, its numbers as drawn, and its Data table's cells once opened
FIGURES_JS = """async () => {
  const open = [...document.querySelectorAll('[role=tabpanel]')].find(p => p.offsetParent !== null);
  const figures = [];
  const described = gd => gd.nextElementSibling?.classList.contains('ae-data');
  for (const gd of open.querySelectorAll('.js-plotly-plot')) {
    // a plot Gradio draws again while this reads the ones before it has its table once figure_text.js's scan ran,
    // 120 ms after the page last changed (later on a busy machine): waited for, up to 10 s, before it counts as missing
    for (let waited = 0; !described(gd) && gd.isConnected && waited < 10000; waited += 50) {
      await new Promise(resolve => setTimeout(resolve, 50));
    }
    if (!gd.isConnected) continue;  // replaced by a redraw while waited for: not read this time (rare)
    const details = gd.nextElementSibling;
    if (!described(gd)) {
      figures.push({missing: gd.closest('[id]').id});
      continue;
    }
    details.open = true;
    await new Promise(resolve => setTimeout(resolve, 50));
    const traces = gd._fullData.filter(t => ['heatmap', 'bar', 'scatter'].includes(t.type) && t.visible !== false);
    figures.push({
      id: gd.closest('[id]').id, role: gd.getAttribute('role'), name: gd.getAttribute('aria-label'),
      title: gd._fullLayout.title.text,
      drawn: traces.map(t => t.type === 'heatmap' ? Array.from(t.z, row => Array.from(row))
                                                  : [Array.from(t.orientation === 'h' ? t.x : t.y)]),
      tables: [...details.querySelectorAll('table')].map(table =>
        [...table.querySelectorAll('tbody tr')].map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent))),
    });
    details.open = false;
  }
  return figures;
}"""


@pytest.fixture(scope="module")
def page(browser, server_url):  # noqa: F811
    page = open_translated(browser, server_url, SENTENCE, 1400, 900)
    idle(page)
    yield page
    page.close()


def cell(text: str) -> float:
    return float("nan") if text == "–" else float(text)


def check_figure(figure: dict) -> None:
    """The name's highest value is the drawn maximum, and every table cell is its drawn value to 3 digits."""
    assert "missing" not in figure, f"no Data table under #{figure.get('missing')}"
    assert figure["role"] == "figure" and figure["name"], figure["id"]
    title = re.sub(r"\s+", " ", re.sub(r"<br>", " ", figure["title"])).strip()
    assert figure["name"].startswith(title), (figure["name"], title)
    drawn = [np.array(d, dtype=float) for d in figure["drawn"]]
    tables = [np.array([[cell(c) for c in row] for row in table], dtype=float) for table in figure["tables"]]
    assert len(tables) == len(drawn), figure["id"]
    for values, table in zip(drawn, tables):
        values = values if table.shape == values.shape else values.T  # a series: one column of the table
        assert table.shape == values.shape, (figure["id"], table.shape, values.shape)
        finite = np.isfinite(values)
        assert (np.isfinite(table) == finite).all(), figure["id"]
        # three significant digits (0.05 % of the value), or whole numbers from 1000
        assert np.allclose(table[finite], values[finite], rtol=5e-3, atol=5e-4 + 0.5 * (np.abs(values[finite]) >= 1000))
    strongest = max(np.nanmax(values) for values in drawn[:1])
    shown = re.search(r"(?:highest |\()(-?[0-9.e+-]+)\)?", figure["name"][len(title):])  # after the title
    assert shown and abs(float(shown.group(1)) - strongest) <= 5e-3 * abs(strongest) + 5e-4, (figure["name"], strongest)


def walk(page, tabs: int) -> tuple[list, set, bool]:
    """From the focused tab button, Tab until every control of the open panel was reached and the focus has left
    it (no trap): (the controls, the numbers reached, whether the focus left)."""
    controls = page.evaluate(CONTROLS_JS)
    reached = set()
    for _ in range(len(controls) + tabs + 30):  # the tab buttons first, then the panel
        page.keyboard.press("Tab")
        focus = page.evaluate(FOCUS_JS)
        reached.add(focus["kb"])
        if reached >= {str(i) for i in range(len(controls))} and not focus["inside"]:
            return controls, reached, True
    return controls, reached, False


def test_every_tab_walked_by_keyboard_alone_and_every_figure_has_its_numbers(page):
    with ServerLog() as log:
        tabs = page.locator("[role=tab]").all_inner_texts()
        checked = 0
        for tab in tabs:
            page.get_by_role("tab", name=tab, exact=True).focus()
            page.keyboard.press("Enter")  # the tab opened by keyboard
            idle(page)
            # twice at most: a table or plot Gradio draws again while the keys walk can move the focus order once
            for _ in range(2):
                controls, reached, left = walk(page, len(tabs))
                # a control Gradio drew again during the walk is a new element: only those still there are counted
                present = set(page.evaluate(PRESENT_JS))
                missed = [c for i, c in enumerate(controls) if str(i) in present and str(i) not in reached]
                if not missed and left:
                    break
                page.get_by_role("tab", name=tab, exact=True).focus()
            assert not missed, f"tab {tab}: not reached by Tab: {missed}"
            assert left, f"tab {tab}: the focus never left the panel after its {len(controls)} controls"
            # figure_text.js names a figure and adds its Data table on a scan 120 ms after the page last changed: a
            # plot Gradio drew again during the walk has its table once that scan ran (on a busy machine, later)
            page.wait_for_function(DESCRIBED_JS, timeout=TIMEOUT)
            for figure in page.evaluate(FIGURES_JS):
                check_figure(figure)
                checked += 1
        assert checked >= 12, checked  # the plotly figures of all tabs
        errors = page.evaluate(ERRORS_JS)
    assert errors == {"toasts": [], "components": []}, errors
    assert log_errors(log.text.getvalue().splitlines()) == []


LIVE_JS = """() => {
  const svg = document.querySelector('#live-attention .ae-heatmap');
  const rows = [...svg.querySelectorAll('.ae-row-label')].map(t => t.textContent);
  const cols = [...svg.querySelectorAll('.ae-col-label')].map(t => t.textContent);
  const m = rows.map(() => cols.map(() => null));
  svg.querySelectorAll('rect.ae-cell').forEach(r => { m[r.dataset.row][r.dataset.col] = Number(r.dataset.weight); });
  return {rows, cols, m, name: svg.getAttribute('aria-label')};
}"""


def test_live_picture_by_arrow_keys_with_its_name_table_and_head_numbers(page):
    with ServerLog() as log:
        page.locator("#live-attention .ae-heatmap rect.ae-cell").first.wait_for(timeout=TIMEOUT)
        live = page.evaluate(LIVE_JS)
        m, rows, cols = np.array(live["m"]), live["rows"], live["cols"]
        i, j = np.unravel_index(np.argmax(m), m.shape)
        named = re.search(re.escape(f"'{rows[i]}' attends most to '{cols[j]}' (") + r"([0-9.]+)\)", live["name"])
        assert named and abs(float(named.group(1)) - m[i, j]) <= 6e-3, live["name"]
        page.locator("#live-attention .ae-heatmap").focus()
        for key in ("ArrowDown", "ArrowRight", "ArrowRight"):
            page.keyboard.press(key)
        row, col = 1, 2
        order = np.argsort(-m[row], kind="stable")
        said = page.locator("#live-attention .ae-tip").inner_text()
        # the cells carry 3 decimals, the words 2 of the unrounded weight: the words' number within 0.006
        most = re.fullmatch(re.escape(f"query {rows[row]} → key {cols[col]}: {m[row, col]:.3f}. '{rows[row]}' attends "
                                      f"most to '{cols[order[0]]}' (") + r"([0-9.]+)\).*", said)
        assert most and abs(float(most.group(1)) - m[row, order[0]]) <= 6e-3, said
        assert page.locator("#live-attention .ae-tip").get_attribute("aria-live") == "polite"
        page.locator("#live-attention details.ae-data summary").click()
        table = page.locator("#live-attention .ae-data-table")
        table.locator("th[scope=col]").first.wait_for(timeout=TIMEOUT)  # built on the toggle event, after the click
        assert table.locator("th[scope=col]").all_inner_texts() == cols
        assert table.locator("th[scope=row]").all_inner_texts() == rows
        values = np.array([float(t) for t in table.locator("tbody td").all_inner_texts()]).reshape(m.shape)
        assert np.allclose(values, m, atol=5e-4)
        page.locator("#live-attention .ae-mode[data-mode=lines]").focus()
        page.keyboard.press("Enter")  # the lines, by keyboard
        lines = page.locator("#live-attention .ae-lines")
        lines.focus()
        page.keyboard.press("ArrowDown")
        assert page.evaluate("() => document.activeElement.classList.contains('ae-lines')")  # focus kept on redraw
        announced = page.locator("#live-attention .ae-announce").inner_text()
        assert announced.startswith(f"query {rows[0]}: head 1, '{rows[0]}' attends most to"), announced
        numbers = page.locator("#live-attention .ae-link-head").evaluate_all(
            "labels => labels.map(t => [Number(t.textContent), Number(t.dataset.head)])")
        assert numbers and all(shown == head + 1 for shown, head in numbers)
        assert page.locator("#live-attention .ae-head-toggle").first.get_attribute("aria-pressed") == "true"
        page.locator("#live-attention .ae-mode[data-mode=heatmap]").click()
    assert log_errors(log.text.getvalue().splitlines()) == []


def test_tree_nodes_and_walk_through_by_enter(page):
    with ServerLog() as log:
        page.get_by_role("tab", name="Search tree", exact=True).click()
        idle(page)
        node = page.locator("#search-tree .tree-node").nth(1)
        token = node.locator("text").text_content()
        node.focus()
        page.keyboard.press("Enter")
        page.locator("#node-text").get_by_text(token, exact=False).first.wait_for(timeout=TIMEOUT)
        assert page.locator("#search-tree .tree-node[aria-pressed=true]").count() == 1
        page.locator("#walk-open").focus()
        page.keyboard.press("Enter")
        page.locator("#walkthrough .wk-stage").wait_for(timeout=TIMEOUT)
        stage = int(page.locator("#walkthrough .wk-walk").get_attribute("data-stage"))
        page.locator("#walkthrough .wk-next").focus()
        page.keyboard.press("Enter")
        page.locator(f"#walkthrough .wk-walk[data-stage='{stage + 1}']").wait_for(timeout=TIMEOUT)
        page.locator("#walkthrough .wk-back").focus()
        page.keyboard.press("Enter")
        page.locator(f"#walkthrough .wk-walk[data-stage='{stage}']").wait_for(timeout=TIMEOUT)
    assert log_errors(log.text.getvalue().splitlines()) == []
