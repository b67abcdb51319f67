"""Compiling the float16 kernel (half_linear.cpp, fused_step.cpp) so that no compiler outlives the process that
asked for it, and a build that is cut short is finished by the next process.

Why a process of its own: torch.utils.cpp_extension.load runs ninja and the compilers as children of the calling
process. A short script ends before them; they are left under PID 1, die half-way without a `.so` and leave their
lock files behind, so a short script never got the kernel. Here the build runs in a builder process (its own
process group) that the caller waits for; the builder ends its whole group, compilers included, the moment its
caller is gone. A caller that reaches its exit while the build runs waits for it with a message (half_linear.py),
so the next run loads the cached kernel at once: where ninja's dry run finds nothing to compile, the process loads it
itself, with no builder (which would import torch a second time).

The build is keyed by the sources' content, so that two copies of the package share it (kernel_sources.py), and by
the torch install whose headers it compiles against.

    attention-explorer-build-kernel      # builds (or finds) the kernel in the foreground, with progress
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from ..command_line import CommandParser
from ..path_checks import folder_problem, os_error_phrase
from .kernel_sources import EXTENSION, header_digest, source_digest, staged_sources

SWITCH = "ATTENTION_EXPLORER_HALF_WEIGHTS"
# the builder's command (`-m` would warn: the package imports this module before running it as __main__)
BUILDER = "import sys; from transformer.core.kernel_build import main; sys.exit(main())"
LOG = "build.log"  # the builder's output, in the build folder: its last lines explain a failed build


class KernelFolderError(RuntimeError):
    """The build folder cannot be made or written: one line naming the path, what it is, and what to do."""


def folder_failure(path, what: str) -> KernelFolderError:
    return KernelFolderError(f"float16 kernel: not built: {path} {what}; set TORCH_EXTENSIONS_DIR to a writable "
                             "folder (meanwhile the layers use float32 F.linear, which is always correct)")


@contextmanager
def folder_errors(folder: Path):
    """Inside it, a file-system failure (read-only, a file where a folder belongs) is a KernelFolderError naming the
    path, never a traceback out of torch's build."""
    try:
        yield
    except OSError as error:
        raise folder_failure(error.filename or folder, os_error_phrase(error)) from None


def build_folder() -> Path:
    """Where the compiled kernel is cached: TORCH_EXTENSIONS_DIR or ~/.cache/torch_extensions, per torch version and
    install (the build names the install's headers: two virtual environments sharing one folder rebuilt it in turn,
    about 30 s each); made here, or a KernelFolderError naming the path that cannot be made or written."""
    try:
        root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    except RuntimeError:  # no HOME, and no user entry to find one in
        raise folder_failure("~", "cannot be found (no HOME)") from None
    install = hashlib.sha256(str(Path(torch.__file__).resolve().parent).encode()).hexdigest()[:8]
    folder = root / f"{EXTENSION}-torch{torch.__version__}-{install}-{source_digest()}"
    with folder_errors(folder):
        folder.mkdir(parents=True, exist_ok=True)
    problem = folder_problem(folder)
    if problem:
        raise folder_failure(folder, problem)
    return folder


def switched_on() -> bool:
    """ATTENTION_EXPLORER_HALF_WEIGHTS: 1 (default) or 0, with a message that names it when it is anything else."""
    text = os.environ.get(SWITCH, "1").strip()
    if text not in ("0", "1"):
        raise ValueError(f"{SWITCH} must be 1 (decode through the float16 kernel where it helps, the default) or 0 "
                         f"(float32 F.linear only), got {text!r}")
    return text == "1"


def check_machine() -> None:
    """Raises RuntimeError saying why the kernel cannot be used here (switched off, or the CPU lacks AVX2)."""
    try:
        on = switched_on()
    except ValueError as error:
        raise RuntimeError(str(error)) from None
    if not on:
        raise RuntimeError(f"switched off by {SWITCH}=0")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        raise RuntimeError(f"the CPU reports {capability}; the kernel needs AVX2, FMA and F16C")


def find_ninja() -> str | None:
    if shutil.which("ninja") is None:
        try:  # the pip package puts its binary beside itself, not on PATH unless a venv is activated
            import ninja
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            pass
    return shutil.which("ninja")


def up_to_date(folder: Path) -> bool:
    """Whether the cached kernel was built from these sources, this header and this torch, and ninja has nothing to
    compile (its dry run, a few milliseconds): then it is loaded here, with no builder process."""
    plan, ninja = folder / "build.ninja", find_ninja()
    if ninja is None or not plan.is_file() or not (folder / f"{EXTENSION}.so").is_file():
        return False
    from torch.utils.cpp_extension import include_paths

    text = plan.read_text(errors="replace")
    expected = [f"-DHEADER_SHA256_{header_digest()}", include_paths()[0], *map(str, staged_sources())]
    if not all(part in text for part in expected):
        return False
    try:
        dry = subprocess.run([ninja, "-C", str(folder), "-n"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return dry.returncode == 0 and "no work to do" in dry.stdout


def load_built(folder: Path, verbose: bool = False):
    """torch's `load`: compiles what is out of date (everything, the first time) and imports the module. Only one
    process builds at a time: it holds an OS lock on `builder.lock`, which ends with its process however that ends,
    so a torch lock file found while holding it is one a dead process left (torch's own lock is a plain file, and
    every later load would wait on it forever)."""
    find_ninja()
    from torch.utils.cpp_extension import load

    with open(folder / "builder.lock", "w") as builder:
        fcntl.flock(builder, fcntl.LOCK_EX)
        (folder / "lock").unlink(missing_ok=True)
        # -fopenmp: without it at::parallel_for runs serially, and a second torch thread never helps the products
        # (docs/speed.md); the runtime is the libgomp torch loaded
        return load(name=EXTENSION, sources=[str(source) for source in staged_sources()], build_directory=str(folder),
                    extra_cflags=["-O3", "-mavx2", "-mfma", "-mf16c", "-fopenmp", f"-DHEADER_SHA256_{header_digest()}"],
                    extra_ldflags=["-fopenmp"], verbose=verbose)


class Builder:
    """The builder process of this process, if one runs: started by `compile_kernel`, waited for at exit."""

    process: subprocess.Popen | None = None


def compile_kernel():
    """The compiled module: built by a builder process where anything is to compile, then imported here."""
    check_machine()
    folder = build_folder()
    with folder_errors(folder):
        return build_in(folder)


def build_in(folder: Path):
    if up_to_date(folder):
        return load_built(folder)
    # the builder imports this package from where this process found it, whatever its working directory
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    with open(folder / LOG, "wb") as log:
        Builder.process = subprocess.Popen(
            [sys.executable, "-c", BUILDER, "--caller", str(os.getpid())], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path})
    try:
        code = Builder.process.wait()
    finally:
        Builder.process = None
    if code != 0:
        lines = (folder / LOG).read_text(errors="replace").strip().splitlines()
        raise RuntimeError(f"the build failed (exit {code}): " + " | ".join(lines[-3:]))
    return load_built(folder)


def stop_builder() -> None:
    """Ends this process's builder and its compilers (Ctrl+C while waiting for it)."""
    process = Builder.process
    if process is not None:
        stop_group(process.pid)  # the builder's own group; its watch then ends the compilers it started


def stop_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # already gone
        pass


def descendants(root: int) -> list[int]:
    """Every process below `root`, from /proc's parent ids. ninja puts each command in a process group of its
    own, so killing the builder's group would leave the compilers running."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def stop_descendants() -> None:
    """Kills ninja, the compilers and whatever they started, until none is left (a shell may be forking a
    compiler as the sweep passes)."""
    for _ in range(50):
        below = descendants(os.getpid())
        if not below:
            return
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def watch_caller(caller: int) -> None:
    """In the builder: once the caller has gone, ends the build (ninja and every compiler) and the builder, so
    nothing keeps compiling for a process that no longer waits. The next build starts over from what ninja kept."""
    while os.getppid() == caller:
        time.sleep(0.2)
    stop_descendants()
    os._exit(3)


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(
        prog="attention-explorer-build-kernel",
        description="Compiles the float16-weight kernel (transformer/core/half_linear.cpp, fused_step.cpp) into "
                    "TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions), showing ninja's steps; does nothing "
                    "if it is up to date. The app and the package build it on first use otherwise. A build folder "
                    "that cannot be made or written ends it with one line naming the path (exit status 2).")
    parser.add_argument("--caller", type=int, help=argparse.SUPPRESS)  # the process a background build is for
    args = parser.parse_args(argv)
    if args.caller is not None:
        threading.Thread(target=watch_caller, args=(args.caller,), name="caller-watch", daemon=True).start()
    try:
        check_machine()
    except RuntimeError as error:
        print(f"float16 kernel: not built ({error}); the layers use float32 F.linear, which is always correct")
        return 0
    try:
        folder = build_folder()
        print(f"float16 kernel: building in {folder} (ninja's steps follow; nothing to do if it is up to date)",
              flush=True)
        started = time.monotonic()
        with folder_errors(folder):
            load_built(folder, verbose=True)
    except KernelFolderError as error:
        parser.error(str(error))
    print(f"float16 kernel: ready ({time.monotonic() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
