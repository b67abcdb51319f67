"""The README and docs/ hold together: every image and relative link they name exists (anchors included), every page
is in the site's nav, the Python API page's example runs as written, and no shipped file or page names a path of
the machine that wrote it."""
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from transformer.paths import is_machine_path, portable_path, portable_words
from transformer.training.model_card import model_card
from transformer.training.timeline import stage_label

from .conftest import ROOT

PAGES = sorted((ROOT / "docs").glob("*.md"))
MARKDOWN = [ROOT / "README.md", ROOT / "CHANGELOG.md", *PAGES]
CHECKPOINTS = sorted(path for path in (ROOT / "checkpoints").iterdir() if (path / "config.json").is_file())
# absolute paths of a machine: POSIX folders where a user's runs live, and Windows drives
MACHINE_PATH = re.compile(r"(?<![\w.:/-])(?:/(?:root|home|tmp|work|Users|mnt|opt|srv|var|private)/|[A-Za-z]:\\)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_SOURCE = re.compile(r"<img[^>]+src=\"([^\"]+)\"")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def targets(page: Path) -> list[str]:
    """Every link and image target of a Markdown page, outside its code blocks."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return LINK.findall(text) + HTML_SOURCE.findall(text)


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc extension makes it (MkDocs' default)."""
    text = re.sub(r"`|\*\*|\*", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(heading) for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M)}


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_image_and_relative_link_exists(page):
    checked = 0
    for target in targets(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # a URL: the site, the Hub or a paper, not a file of this repository
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{page.relative_to(ROOT)} links to {target}: no such heading"
        checked += 1
    if page.name == "README.md":
        assert checked >= 10  # its screenshots and its links into docs/ were all seen


def test_the_readme_shows_screenshots_that_exist():
    images = [t for t in targets(ROOT / "README.md") if t.endswith(".png")]
    assert images and all((ROOT / image).is_file() for image in images)


def test_the_anchor_of_a_heading_is_the_one_mkdocs_makes():
    assert slug("Faster but not exact: int8 decoding (opt-in)") == "faster-but-not-exact-int8-decoding-opt-in"
    assert slug("Query · key") == "query-key"
    assert slug("The shipped models: Tatoeba + Multi30k") == "the-shipped-models-tatoeba-multi30k"


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    nav = re.findall(r"^\s*-\s+.*?:\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert sorted(nav) == sorted(page.name for page in PAGES)


def test_the_readme_is_a_card_with_the_space_front_matter():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert readme.startswith("---\ntitle: Attention Explorer\n") and "\nsdk: gradio\n" in readme.split("\n---\n")[0]
    assert "bash scripts/run.sh" in readme and "bash scripts/test.sh" in readme
    assert "CC-BY 2.0" in readme and "tatoeba.org" in readme and "manythings.org/anki" in readme


def run_python_api_example(marker: str, folder) -> list[str]:
    """Runs the example of docs/python-api.md that contains `marker`, as written; returns the lines it printed."""
    page = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    example = next(block for block in re.findall(r"```python\n(.*?)```", page, re.S) if marker in block)
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "ATTENTION_EXPLORER_HALF_WEIGHTS": "0"}
    run = subprocess.run([sys.executable, "-c", example], cwd=folder, env=environment, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.splitlines()


def test_the_python_api_example_runs_as_written(tmp_path):
    lines = run_python_api_example("capture_attention", tmp_path)
    assert lines[0] == "9206"  # the closed-form count of that configuration, also checked in tests/test_model.py
    assert lines[1] == "torch.Size([6, 2, 8, 9, 9]) torch.Size([6, 2, 8, 7, 7]) torch.Size([6, 2, 8, 7, 9])"


def test_the_recording_example_runs_as_written(tmp_path):
    lines = run_python_api_example("recordable", tmp_path)
    assert lines[0] == "['encoder_layers.0.self_attention.queries', 'encoder_layers.0.self_attention.keys']"
    assert lines[1:] == ["torch.Size([3, 2, 9, 32])", "torch.Size([2, 4, 7, 9])"]


def shipped_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from shipped_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from shipped_strings(item)


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=lambda path: path.name)
def test_no_shipped_json_names_a_path_of_the_machine_that_wrote_it(checkpoint):
    files = sorted(checkpoint.glob("*.json"))
    assert {"config.json", "metrics.json"} <= {path.name for path in files}
    for path in files:
        for text in shipped_strings(json.loads(path.read_text(encoding="utf-8"))):
            machine = [word for word in text.split() if is_machine_path(word) or MACHINE_PATH.search(word)]
            assert not machine, f"{path.relative_to(ROOT)}: {machine} in {text[:200]!r}"


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=lambda path: path.name)
def test_no_model_card_names_a_path_of_a_machine(checkpoint):
    card = model_card(json.loads((checkpoint / "metrics.json").read_text(encoding="utf-8")),
                      f"checkpoints/{checkpoint.name}")
    assert not MACHINE_PATH.search(card), MACHINE_PATH.search(card)


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_page_names_a_path_of_a_machine(page):
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        assert not MACHINE_PATH.search(line), f"{page.relative_to(ROOT)}:{number}: {line}"


def test_the_machine_path_check_sees_one():
    assert MACHINE_PATH.search("trained on /root/runs2/mix") and MACHINE_PATH.search("C:\\runs\\mix")
    assert not MACHINE_PATH.search("https://example.org/tmp/x") and not MACHINE_PATH.search("runs2/mix")
    assert is_machine_path("../../root/runs2/mix/train.de") and not is_machine_path("../shared/data/tatoeba")


def test_recorded_paths_are_portable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "mix").mkdir(parents=True)
    assert portable_path(tmp_path / "runs" / "mix") == "runs/mix"  # inside the working directory: relative
    assert portable_path("/elsewhere/runs2/mix") == "runs2/mix"  # outside: its last two parts
    assert portable_path("../shared/data/tatoeba") == "../shared/data/tatoeba"  # as typed
    assert portable_path("C:\\Users\\me\\runs\\mix") == "runs/mix"
    assert portable_words(["--data-dir", "/root/runs2/mix", "--out=/work/runs/s2", "--lr", "0.1"]) == [
        "--data-dir", "runs2/mix", "--out=runs/s2", "--lr", "0.1"]
    assert stage_label("/work/runs/en-de-s1", "/root/runs2/mix") == (
        "a warm start from runs/en-de-s1, trained on runs2/mix")


def test_the_python_api_page_lists_every_strategy_setting_with_its_range():
    from transformer.decoding.strategies.registry import all_settings, get_strategy

    page = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\w+) \| `(\w+)` \| ([\d.]+) \| ([\d.]+) to ([\d.]+) \| (.+?) \|$", page, re.M)
    listed = {(strategy, name): (float(default), float(low), float(high)) for strategy, name, default, low, high, _
              in rows}
    shipped = [spec for spec in all_settings()  # the package's own strategies, not one a test registers
               if get_strategy(spec.strategy).decode.__module__.startswith("transformer.decoding.strategies.")]
    assert listed == {(spec.strategy, spec.name): (spec.default, spec.minimum, spec.maximum) for spec in shipped}


def test_the_patching_example_gives_the_numbers_the_page_states():
    """docs/patching.md's worked example: its command, run in this process, gives the figures the page quotes."""
    import shlex

    from transformer.analysis.causal.cli import run

    page = (ROOT / "docs" / "patching.md").read_text(encoding="utf-8")
    command = next(line for line in page.splitlines() if line.startswith("python -m transformer.analysis patch"))
    argv = shlex.split(command)
    assert argv[:4] == ["python", "-m", "transformer.analysis", "patch"]
    out = run(argv[4:] + ["--threads", "1"])
    assert out["clean"]["translation"] == "Der alte Mann sitzt auf der Bank des Flusses."
    assert out["corrupted"]["translation"] == "Der alte Mann sitzt auf der Bank der Stadt."
    assert (round(out["p_clean"], 3), round(out["p_corrupted"], 3)) == (0.710, 0.018)
    assert f"p_clean = {out['p_clean']:.3f}, p_corrupted = {out['p_corrupted']:.3f}" in page
    residual = out["analyses"]["trace"][0]["restored_share"]
    cross = next(g for g in out["analyses"]["heads"] if g["site"] == "cross")["restored_share"]
    assert f"alone restores {residual[0][9]:.2f}" in page and f"restores {cross[3][0]:.2f}" in page
    assert f"rank correlation {out['attribution_rank_correlation']:.3f}" in page
    assert f"{len(out['disagreements'])} cells differ" in page
