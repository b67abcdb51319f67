"""The README's package example runs as written and prints what the README says it prints."""
import importlib
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
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = next(block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "capture_attention" in block)
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


@pytest.mark.slow
def test_a_non_editable_install_names_what_to_pass(tmp_path):
    """`pip install .` copies the package, not the repository's checkpoints/: a shipped name then fails with an
    error that says which path to pass, and that path works."""
    target = tmp_path / "site"
    build = tmp_path / "source"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(ROOT, build, ignore=shutil.ignore_patterns(".git", ".venv", "checkpoints", "assets", "build",
                                                               "*.egg-info", "__pycache__", ".pytest_cache"))
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                                "--target", str(target), str(build)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    # the installed copy's kernel source has another path, so torch would rebuild the cached float16 kernel, and
    # this short process would exit mid-build and leave torch's build lock behind for every later process
    environment = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(target),
                   "ATTENTION_EXPLORER_HALF_WEIGHTS": "0"}
    check = ("import sys\nfrom transformer import Translator\nfrom transformer.checkpoint import CheckpointError\n"
             "try:\n    Translator.from_pretrained('en-de')\nexcept CheckpointError as error:\n    print(error)\n"
             f"print(Translator.from_pretrained({str(ROOT / 'checkpoints' / 'en-de')!r}).translate('A dog runs.').text)\n"
             "import transformer; print(transformer.__file__)")
    run = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=environment, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    message, translation, location = run.stdout.strip().splitlines()
    assert location.startswith(str(target))  # the installed copy, not the clone
    assert "Pass the folder's path" in message and "checkpoints/en-de" in message and "pip install -e ." in message
    assert translation.strip()


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
