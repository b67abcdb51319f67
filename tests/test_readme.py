"""The README's package example runs as written, from any directory and from a plain install, and prints what the
README says it prints."""
import importlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT


def test_readme_package_example_runs_from_any_directory(tmp_path):
    """With the project installed (scripts/test.sh runs `pip install -e .`), from a directory that is not
    the repository and with nothing on PYTHONPATH."""
    example = readme_example()
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, env=environment, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "9206"
    assert lines[1] == "torch.Size([6, 2, 8, 9, 9]) torch.Size([6, 2, 8, 7, 7]) torch.Size([6, 2, 8, 7, 9])"


def test_the_model_package_needs_neither_plotly_nor_gradio():
    check = "import transformer, sys; assert not {'plotly', 'gradio'} & set(sys.modules), sorted(sys.modules)"
    run = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return next(block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "capture_attention" in block)


@pytest.mark.slow
def test_a_plain_install_runs_the_readme_example_from_another_directory(tmp_path):
    """`pip install .` (not editable) carries the shipped models as package data: the README's example, run from a
    directory under /tmp with only the installed copy on the path, finds "en-de" by name and translates."""
    target = tmp_path / "site"
    build = tmp_path / "source"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(ROOT, build, ignore=shutil.ignore_patterns(".git", ".venv", "assets", "build", "*.egg-info",
                                                               "__pycache__", ".pytest_cache", ".screenshots"))
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                                "--target", str(target), str(build)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    shutil.rmtree(build)  # the installed copy must not lean on the source it was built from
    # the installed copy's kernel source has another path, so torch would rebuild the cached float16 kernel, and
    # this short process would exit mid-build and leave torch's build lock behind for every later process
    environment = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(target),
                   "ATTENTION_EXPLORER_HALF_WEIGHTS": "0"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    check = readme_example() + "\nimport transformer; print(transformer.__file__)\n"
    run = subprocess.run([sys.executable, "-c", check], cwd=elsewhere, env=environment, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert lines[0] == "9206"
    translation, shape, location = lines[2], lines[3], lines[-1]
    assert location.startswith(str(target))  # the installed copy, not the clone
    assert (target / "transformer" / "checkpoints" / "en-de" / "model.safetensors").is_file()
    assert translation.strip() and translation != "A man rides a bike."
    shipped = json.loads((ROOT / "checkpoints" / "en-de" / "config.json").read_text())["model"]
    assert shape.startswith(f"({shipped['n_layers']}, {shipped['n_heads']}, ")  # (layers, heads, target, source)


def test_a_copy_without_checkpoints_says_what_to_pass(monkeypatch, tmp_path):
    from transformer import checkpoint

    monkeypatch.setattr(checkpoint, "SHIPPED_ROOT", tmp_path / "missing")
    with pytest.raises(checkpoint.CheckpointError, match="Pass the folder's path") as error:
        checkpoint.checkpoint_folder("en-de")
    assert "checkpoints/en-de" in str(error.value) and "pip install ." in str(error.value)


def test_every_command_line_is_an_installed_script_whose_help_runs(capsys):
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"attention-explorer-train", "attention-explorer-evaluate", "attention-explorer-data"} <= set(scripts)
    for name, target in scripts.items():
        module_name, function = target.split(":")
        main = getattr(importlib.import_module(module_name), function)
        with pytest.raises(SystemExit) as stopped:
            main(["--help"])
        assert stopped.value.code == 0, name
        assert "usage:" in capsys.readouterr().out, name
