"""The README's package example runs as written and prints what the README says it prints."""
import re
import subprocess
import sys

from .conftest import ROOT


def test_readme_package_example_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = next(block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "capture_attention" in block)
    run = subprocess.run([sys.executable, "-c", example], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "9206"
    assert lines[1] == "torch.Size([6, 2, 8, 9, 9]) torch.Size([6, 2, 8, 7, 7]) torch.Size([6, 2, 8, 7, 9])"
