"""The README's package example runs as written and prints what the README says it prints."""
import os
import re
import subprocess
import sys

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
