"""The float16 weight copies (core/half_linear.py): the compiled kernel against F.linear on the float32 weights,
decoding with and without them, and the cases that must fall back to F.linear."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer import Transformer, Translator
from transformer.core.half_linear import (
    EXTENSION,
    KERNEL,
    MAX_ROWS,
    KernelBuild,
    attach_half_weights,
    build_folder,
    project,
)
from transformer.core.kernel_sources import staged_sources
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.strategies.beam import beam_search
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy

from .conftest import SHIPPED, tiny_config

pytestmark = pytest.mark.kernel


@pytest.fixture
def counted_kernel(kernel, monkeypatch):
    """The kernel, counting its calls: a test that means to exercise it can see that it did."""
    calls = []

    class Counting:
        def linear(self, *args):
            calls.append(args[0].shape)
            return kernel.linear(*args)

    monkeypatch.setattr(KERNEL, "module", Counting())
    return calls


def float16_exact_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    model = Transformer(tiny_config(**overrides)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.half().float())  # as a checkpoint stored in float16 loads
    return model


@pytest.mark.parametrize("rows", [1, 3, 5, MAX_ROWS])  # 4 rows at a time, then 1 to 3
@pytest.mark.parametrize("width", [16, 37, 256])  # 37: the scalar tail after the 16-wide loop
@pytest.mark.parametrize("with_bias", [True, False])
def test_kernel_equals_float32_linear(kernel, rows, width, with_bias):
    torch.manual_seed(rows * width)
    x, weight = torch.randn(rows, width), torch.randn(50, width).half()
    bias = torch.randn(50) if with_bias else None
    expected = F.linear(x.double(), weight.double(), bias.double() if with_bias else None)  # independent, float64
    # float32 sums of up to 256 products against float64: ~sqrt(width) ulps of values of order 10, inside 1e-5
    torch.testing.assert_close(kernel.linear(x, weight, bias).double(), expected, rtol=1e-5, atol=1e-5)


def test_the_avx2_path_where_avx512_is_chosen(kernel):
    """On an AVX-512 CPU the kernel takes its 16-wide path; ATTENTION_EXPLORER_NO_AVX512 keeps the 8-wide AVX2 one,
    which other machines run: held here to the same float64 reference, in a process of its own (the choice is made
    once per process)."""
    script = ("import torch, torch.nn.functional as F\n"
              "from transformer.core.half_linear import KERNEL\n"
              "kernel = KERNEL.wait()\n"
              "torch.manual_seed(0)\n"
              "for rows in (1, 3, 4, 7):\n"
              "    for width in (16, 37, 256):\n"
              "        x, w, b = torch.randn(rows, width), torch.randn(50, width).half(), torch.randn(50)\n"
              "        expected = F.linear(x.double(), w.double(), b.double())\n"
              "        torch.testing.assert_close(kernel.linear(x, w, b).double(), expected, rtol=1e-5, atol=1e-5)\n"
              "print('ok')")
    env = {**os.environ, "ATTENTION_EXPLORER_NO_AVX512": "1"}
    out = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parent.parent, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_another_thread_runs_python_while_the_kernel_multiplies(kernel):
    """The kernel releases the GIL, as torch's own operators do: the server decodes two requests at once in
    threads. While one thread is inside a long multiplication, the main thread's Python must not wait for it
    (the binding before measured: 68 ms of a 90 ms multiplication; after: 0.5 ms)."""
    import threading

    x, weight = torch.randn(MAX_ROWS, 2048), torch.randn(32768, 2048).half()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        started = time.perf_counter()
        kernel.linear(x, weight)
        alone = time.perf_counter() - started  # one multiplication, here about 45 ms
        waits = []
        for _ in range(3):  # a held GIL makes every trial wait; a busy machine delays one now and then
            inside = threading.Event()

            def multiply():
                inside.set()
                for _ in range(3):
                    kernel.linear(x, weight)

            worker = threading.Thread(target=multiply)
            worker.start()
            inside.wait()
            nap = alone / 4
            started = time.perf_counter()
            time.sleep(nap)  # the worker is inside the kernel when this ends; waking needs the GIL
            sum(range(20_000))  # pure Python: it needs the GIL too
            waits.append(time.perf_counter() - started - nap)
            worker.join()
    finally:
        torch.set_num_threads(threads)
    assert min(waits) < alone / 3, (
        f"Python waited {min(waits) * 1000:.0f} ms for a {alone * 1000:.0f} ms multiplication"
    )


def test_kernel_rejects_what_it_cannot_read(kernel):
    with pytest.raises(RuntimeError, match="float16"):
        kernel.linear(torch.randn(1, 8), torch.randn(4, 8), None)
    with pytest.raises(RuntimeError, match="features"):
        kernel.linear(torch.randn(1, 8), torch.randn(4, 6).half(), None)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoding_with_half_weights_equals_float32(counted_kernel, norm):
    model = float16_exact_model(d_model=40, n_heads=4, d_ff=48, norm=norm, final_norm=norm == "pre")
    sources = [[5, 6, 7, 8, 3]]
    with torch.inference_mode():
        plain_greedy = decode_greedy(model, sources, GreedySettings(), 12, ATTENTION_KINDS)[0]
        plain_beam = beam_search(model, sources, 3, max_length=12, probes=ATTENTION_KINDS)[0]
        layers = sum(isinstance(m, nn.Linear) for m in model.modules())
        assert model.use_half_weights(True) == layers
        half_greedy = decode_greedy(model, sources, GreedySettings(), 12, ATTENTION_KINDS)[0]
        half_beam = beam_search(model, sources, 3, max_length=12, probes=ATTENTION_KINDS)[0]
    assert counted_kernel, "the decoding steps never reached the kernel"
    for plain, half in ((plain_greedy, half_greedy), (plain_beam, half_beam)):
        assert half.token_ids == plain.token_ids
        # the same float16-exact weights through our kernel and through F.linear: only the order of float32 sums
        # differs, a few ulps per product carried through two layers; probabilities and scores of order 1
        assert half.score == pytest.approx(plain.score, abs=1e-5)
        torch.testing.assert_close([s.prob for s in half.steps], [s.prob for s in plain.steps], atol=1e-5, rtol=0)
        for kind in ATTENTION_KINDS:
            torch.testing.assert_close(torch.as_tensor(half.recorded[kind]), torch.as_tensor(plain.recorded[kind]),
                                       atol=1e-5, rtol=0)


def test_weights_that_float16_would_round_get_no_copy(kernel):
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()  # fresh float32 initialisation: not float16-exact
    assert model.use_half_weights(True) == 0
    assert all(getattr(m, "half_weight", None) is None for m in model.modules() if isinstance(m, nn.Linear))


def test_a_weight_changed_after_the_copy_is_read_as_it_is_now(counted_kernel):
    layer = nn.Linear(16, 8)
    with torch.no_grad():
        layer.weight.copy_(layer.weight.half().float())
    assert attach_half_weights(layer) == 1
    x = torch.randn(1, 16)
    with torch.no_grad():
        project(x, layer)
        assert len(counted_kernel) == 1
        layer.weight.mul_(3)  # in place, as load_state_dict or an optimizer would
        # exact: the stale copy is skipped, so project runs F.linear itself on the same tensors in the same thread
        torch.testing.assert_close(project(x, layer), F.linear(x, layer.weight, layer.bias), rtol=0, atol=0)
    assert len(counted_kernel) == 1  # the stale copy was not used


def test_many_rows_and_gradients_use_float32_linear(counted_kernel):
    layer = nn.Linear(16, 8)
    with torch.no_grad():
        layer.weight.copy_(layer.weight.half().float())
    assert attach_half_weights(layer) == 1
    project(torch.randn(MAX_ROWS + 1, 16), layer)
    project(torch.randn(1, 16, requires_grad=True), layer)
    assert counted_kernel == []


def test_the_shipped_weights_are_float16_exact_so_every_layer_gets_a_copy():
    translator = Translator.from_pretrained(SHIPPED)
    layers = [m for m in translator.model.modules() if isinstance(m, nn.Linear)]
    assert all(torch.equal(m.weight.half().float(), m.weight) for m in layers)  # a rounding, no sum: exact
    assert all(m.half_weight is not None for m in layers)


def test_a_build_lock_left_by_a_process_that_ended_mid_build_does_not_stall_the_next(kernel):
    """torch's build lock is a plain file; a short script whose background build thread dies with it leaves
    one behind (this stalled CI's whole kernel suite). The next process must build or load all the same."""
    folder = build_folder()
    (folder / "lock").touch()
    script = "from transformer.core.half_linear import compile_kernel; print(compile_kernel().__name__)"
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              cwd=Path(__file__).parents[1])
    finally:
        (folder / "lock").unlink(missing_ok=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == EXTENSION


def test_a_current_kernel_loads_in_process_and_a_stale_one_goes_to_the_builder(kernel, monkeypatch):
    """With the cache up to date, no builder process starts (it would import torch again: a second or two of CPU at
    every start-up); with anything to compile, the build goes to the builder, which no compiler outlives."""
    from transformer.core import kernel_build

    started, popen = [], subprocess.Popen

    def no_builder(command, *args, **kwargs):  # ninja's dry run may start; the builder may not
        if kernel_build.BUILDER in command:
            started.append(command)
            raise AssertionError("a builder process was started")
        return popen(command, *args, **kwargs)

    monkeypatch.setattr(kernel_build.subprocess, "Popen", no_builder)
    assert kernel_build.up_to_date(build_folder())
    assert kernel_build.compile_kernel().__name__ == EXTENSION and not started
    monkeypatch.setattr(kernel_build, "header_digest", lambda: "0" * 16)  # as if half_linear.h had changed
    assert not kernel_build.up_to_date(build_folder())
    with pytest.raises(AssertionError, match="builder process"):
        kernel_build.compile_kernel()


def compilers_in(folder: Path) -> list[str]:
    """The processes working in the build folder: ninja, the compiler driver and cc1plus all run there."""
    found = []
    for process in Path("/proc").iterdir():
        if process.name.isdigit():
            try:
                if os.readlink(process / "cwd").startswith(str(folder)):
                    found.append((process / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
            except OSError:  # ended meanwhile, or not ours to read
                pass
    return found


def seed(folder: Path, objects: tuple[str, ...] = ("fused_step.o",)) -> None:
    """Copies the suite's own build of `objects` (ninja's files and their times too) into `folder`, so that ninja
    compiles only the other objects there: the same build, as the sources are read from the same staged copies
    (kernel_sources.staged_sources). Nothing is copied where the suite has no build of these sources; ninja then
    compiles everything."""
    built = build_folder()
    if not all((built / name).exists() for name in objects) or \
            str(staged_sources()[0]) not in (built / "build.ninja").read_text():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("build.ninja", ".ninja_log", ".ninja_deps", *objects):
        if (built / name).exists():
            shutil.copy2(built / name, folder / name)


def test_short_scripts_leave_no_compiler_running_and_the_next_run_uses_the_kernel(tmp_path):
    """From a cache without the kernel: a script killed mid-build takes its compilers with it (they used to outlive
    it under PID 1 and die half-way, leaving lock files); a short script that exits while the build runs waits for it
    at exit and leaves nothing running; the run after that, from a second copy of the package (a pip install beside
    a checkout), loads the same build without compiling: the cache is keyed by the sources' content, not their
    path."""
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("the kernel needs AVX2; F.linear is used instead")
    cache = tmp_path / "cache"
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache)}
    env.pop("ATTENTION_EXPLORER_HALF_WEIGHTS", None)
    folder = cache / build_folder().name  # named by the install and the sources, wherever the cache is
    seed(folder)  # half_linear.cpp alone is compiled, and killed half-way
    run = dict(env=env, cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=400)
    killed = subprocess.Popen([sys.executable, "-c", "from transformer.core.half_linear import KERNEL; "
                               "KERNEL.start(); import time; time.sleep(600)"], env=env, cwd=run["cwd"])
    try:
        deadline = time.monotonic() + 60
        while not compilers_in(folder) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert compilers_in(folder), "the build never started"
    finally:
        killed.kill()  # the script alone, as an OOM kill or a closed terminal ends it
        killed.wait()
    deadline = time.monotonic() + 10
    while compilers_in(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not compilers_in(folder) and not list(folder.glob("*.so"))

    # the build the short script finishes at exit: linking both objects (compiling half_linear.cpp again would add
    # about 40 s and prove nothing more)
    seed(folder, ("fused_step.o", "half_linear.o"))
    short = subprocess.run([sys.executable, "-c", "from transformer.core.half_linear import KERNEL; KERNEL.start()"],
                           **run)
    # it waited for the link at exit (test_a_build_still_running_at_exit_is_waited_for_and_said: what it says when
    # that takes long): the kernel is there, and nothing of the build still runs
    assert short.returncode == 0, short.stderr[-2000:]
    assert not compilers_in(folder)
    [built] = folder.glob("*.so")
    built_at = built.stat().st_mtime_ns

    second = tmp_path / "second"  # another copy of the same sources, at another path
    shutil.copytree(Path(__file__).parents[1] / "transformer", second / "transformer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    script = ("import transformer; from transformer.core.half_linear import KERNEL; KERNEL.wait(); "
              "print(transformer.__file__); print(KERNEL.status)")
    again = subprocess.run([sys.executable, "-c", script], **{**run, "cwd": second})
    assert again.stdout.split() == [str(second / "transformer" / "__init__.py"), "ready"], again.stderr[-2000:]
    assert "finishing" not in again.stderr, again.stderr[-2000:]
    assert built.stat().st_mtime_ns == built_at and not compilers_in(folder)  # loaded, not compiled again
    assert [path.name for path in cache.iterdir()] == [folder.name]  # one build for both copies


class SlowBuild:
    """A build's done-event that is not set within the first wait at exit, then is."""

    def __init__(self):
        self.waits = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return timeout is None


def test_a_build_still_running_at_exit_is_waited_for_and_said(capsys):
    """A process that exits while the build is still running after 10 s says so, once, and waits for the end."""
    build = KernelBuild()
    build._done = SlowBuild()
    build._finish_at_exit()
    assert build._done.waits == [10, None]  # a short wait in silence, then the whole build
    assert "finishing the float16 kernel's build before exiting" in capsys.readouterr().err
