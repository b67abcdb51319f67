"""The float16 kernel's build folder on a file system that refuses it (core/kernel_build.py): a cache folder that
cannot be made (a file stands in its path), a cache path that is a file, an unwritable HOME, a read-only cache or
build folder. `attention-explorer-build-kernel` answers each in one line naming the path and TORCH_EXTENSIONS_DIR
(exit status 2, no traceback), and the package falls back to float32 F.linear, logging that line.

Nothing is compiled here: each failure comes before the compiler would run. The tests run as root, where chmod
does not stop writes, so read-only is a PermissionError raised by a patched os function."""
import logging
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer.core import half_linear, kernel_build
from transformer.core.half_linear import KernelBuild, attach_half_weights, project


@pytest.fixture
def machine_fits(monkeypatch):
    """As if this CPU could run the kernel, so that the build goes on to its folder."""
    monkeypatch.setattr(kernel_build, "check_machine", lambda: None)


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "somefile"
    path.write_text("a file, not a folder")
    return path


def one_line(capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        kernel_build.main([])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("attention-explorer-build-kernel: error: float16 kernel: not built: ")
    assert "set TORCH_EXTENSIONS_DIR to a writable folder" in err
    return err


def test_a_cache_folder_under_a_file(machine_fits, monkeypatch, a_file, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(a_file / "cache"))
    assert f"cannot be made: {a_file} is a file, not a folder" in one_line(capsys)


def test_a_cache_path_that_is_a_file(machine_fits, monkeypatch, a_file, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(a_file))
    assert f"cannot be made: {a_file} is a file, not a folder" in one_line(capsys)


def test_an_unwritable_home(machine_fits, monkeypatch, a_file, capsys):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(a_file))
    line = one_line(capsys)
    assert str(a_file / ".cache") in line and f"{a_file} is a file, not a folder" in line


def test_a_read_only_cache_folder(machine_fits, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))

    def refused(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refused)
    line = one_line(capsys)
    assert str(tmp_path / "cache") in line and "is read-only (permission denied)" in line


def test_a_read_only_build_folder(machine_fits, monkeypatch, tmp_path, capsys):
    """The folder exists; writing its lock file is refused (as on a read-only mount)."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    real_open = open

    def refused(path, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wa+"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(kernel_build, "open", refused, raising=False)
    line = one_line(capsys)
    assert "builder.lock is read-only (permission denied)" in line


def test_the_package_falls_back_to_float32_and_logs_the_line(machine_fits, monkeypatch, a_file, caplog):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(a_file / "cache"))
    build = KernelBuild()
    with caplog.at_level(logging.WARNING, logger=half_linear.__name__):
        assert build.wait(timeout=60) is None
    assert build.status.startswith("unavailable: float16 kernel: not built: ")
    assert f"{a_file} is a file, not a folder" in build.status
    assert [r.getMessage() for r in caplog.records] == [build.status.removeprefix("unavailable: ")]
    # the layers, with this build as the process's kernel, compute F.linear on the float32 weights
    monkeypatch.setattr(half_linear, "KERNEL", build)
    torch.manual_seed(0)
    linear = nn.Linear(8, 4)
    with torch.no_grad():
        linear.weight.copy_(linear.weight.half().float())  # float16-exact, so a half copy is attached
    monkeypatch.setattr(KernelBuild, "start", lambda self: None)  # the failed build is not started again
    assert attach_half_weights(linear) == 1
    x = torch.randn(1, 8)
    with torch.no_grad():
        assert torch.equal(project(x, linear), F.linear(x, linear.weight, linear.bias))
