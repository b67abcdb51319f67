"""Linear layers that read a float16 copy of their weights when decoding one or a few rows on the CPU.

Why: a decoding step multiplies 1 to 4 rows by every weight matrix, so on the CPU its speed is the speed of
reading the weights (17.6 MB in float32 per step), and on machines whose cache does not hold them that is
most of a step. The shipped checkpoints store their weights in float16 (checkpoint.py), so a float16 copy
holds exactly the same values in half the bytes. PyTorch has no CPU matmul of float32 inputs with float16
weights, so `half_linear.cpp` (with `half_linear.h`) widens each weight to float32 in registers and accumulates in
float32: its results match `F.linear` to float32 rounding (~3e-7 relative). Running the whole model in
float16 instead is as fast but changed 8 of the 1,014 val translations, and BLEU.

The kernel is compiled with torch.utils.cpp_extension the first time a model switches this on (about 30 s,
in a background thread, cached under ~/.cache/torch_extensions); until then, and wherever it cannot be
built (no compiler, no AVX2/F16C, ATTENTION_EXPLORER_HALF_WEIGHTS=0), every layer runs `F.linear` as before.

    model.use_half_weights(True)     # Transformer; Translator.from_pretrained does this on the CPU
    project(x, module.fc1)           # what the layers call instead of F.linear
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

SWITCH = "ATTENTION_EXPLORER_HALF_WEIGHTS"
# measured on a 2-core CPU: 1 row 7x faster than F.linear, 4 rows 3x, 16 rows even; beyond that the
# float32 matmul, which reuses each weight across rows, wins
MAX_ROWS = 8
# the kernel, every decoder layer's step on it (fused_step.cpp), and their shared matrix product (half_linear.h);
# torch rebuilds when a source's text changes, so the header's text is part of the build's name
SOURCES = [Path(__file__).with_name(name) for name in ("half_linear.cpp", "fused_step.cpp")]
HEADER = Path(__file__).with_name("half_linear.h")
EXTENSION = "attention_explorer_half_linear"


@dataclass
class HalfWeight:
    """The float16 copy of a layer's weight, valid while the weight's version counter is `version`."""
    tensor: torch.Tensor
    version: int


class KernelBuild:
    """Compiles the kernel once per process, in a background thread; `status` says why it is not in use."""

    def __init__(self):
        self.module = None
        self.status = "not started"
        self._lock = threading.Lock()
        self._done = threading.Event()

    def start(self) -> None:
        with self._lock:
            if self.status != "not started":
                return
            self.status = "building"
        threading.Thread(target=self._build, name="half-linear-build", daemon=True).start()

    def wait(self, timeout: float | None = None):
        """The compiled module, or None if it could not be built (see `status`) or is still building."""
        self.start()
        self._done.wait(timeout)
        return self.module

    def _build(self) -> None:
        try:
            self.module, self.status = compile_kernel(), "ready"
        except Exception as error:  # any failure leaves the float32 path, which is always correct
            self.status = f"unavailable: {type(error).__name__}: {str(error).strip()[:300]}"
        finally:
            self._done.set()


def compile_kernel():
    if os.environ.get(SWITCH, "1") == "0":
        raise RuntimeError(f"switched off by {SWITCH}=0")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        raise RuntimeError(f"the CPU reports {capability}; the kernel needs AVX2, FMA and F16C")
    if shutil.which("ninja") is None:
        try:  # the pip package puts its binary beside itself, not on PATH unless a venv is activated
            import ninja
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            pass
    from torch.utils.cpp_extension import load

    folder = build_folder()
    # torch's build lock is a plain file: a process that ends mid-build (a short script whose daemon build
    # thread dies with it, a server stopped early) leaves it behind, and every later load then waits forever.
    # Builds here first take an OS lock, which ends with its process however that ends; whoever holds it is
    # the only builder, so a torch lock file it finds is one a dead process left.
    with open(folder / "builder.lock", "w") as builder:
        fcntl.flock(builder, fcntl.LOCK_EX)
        (folder / "lock").unlink(missing_ok=True)
        # -fopenmp: without it at::parallel_for runs serially, and a second torch thread never helps the products
        # (docs/speed.md); the runtime is the libgomp torch loaded
        return load(name=EXTENSION, sources=[str(source) for source in SOURCES], build_directory=str(folder),
                    extra_cflags=["-O3", "-mavx2", "-mfma", "-mf16c", "-fopenmp", f"-DHEADER_SHA256_{header_digest()}"],
                    extra_ldflags=["-fopenmp"], verbose=False)


def header_digest() -> str:
    return hashlib.sha256(HEADER.read_bytes()).hexdigest()[:16]


def build_folder() -> Path:
    """Where the compiled kernel is cached: TORCH_EXTENSIONS_DIR or ~/.cache/torch_extensions, per torch version."""
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    folder = root / f"{EXTENSION}-torch{torch.__version__}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


KERNEL = KernelBuild()


def attach_half_weights(model: nn.Module) -> int:
    """Gives every nn.Linear whose weight float16 holds exactly a float16 copy (`half_weight`); returns how
    many. Weights that float16 would round (a model in training) keep none, so their results never change."""
    attached = 0
    for module in model.modules():
        if isinstance(module, nn.Linear):
            weight = module.weight.detach()
            half = weight.to(torch.float16)
            exact = weight.device.type == "cpu" and weight.dtype == torch.float32 and torch.equal(half.float(), weight)
            module.half_weight = HalfWeight(half.contiguous(), module.weight._version) if exact else None
            attached += exact
    if attached:
        KERNEL.start()
    return attached


def detach_half_weights(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.half_weight = None


def project(x: torch.Tensor, linear: nn.Linear, rows: slice | None = None) -> torch.Tensor:
    """`F.linear(x, linear.weight[rows], linear.bias[rows])`, through the float16 copy when that is faster:
    few rows, float32 on the CPU, no gradient wanted, the kernel built and the weight unchanged since."""
    weight, bias = linear.weight, linear.bias
    half = getattr(linear, "half_weight", None)
    kernel = KERNEL.module
    width = x.size(-1)
    if rows is not None:  # sliced once, for whichever path runs: this is called every decoding step
        bias = bias[rows] if bias is not None else None
    if (half is None or kernel is None or x.numel() > MAX_ROWS * width or x.dtype != torch.float32 or not x.is_cpu
            or (x.requires_grad and torch.is_grad_enabled()) or half.version != weight._version):
        return F.linear(x, weight if rows is None else weight[rows], bias)
    half_rows = half.tensor if rows is None else half.tensor[rows]
    out = kernel.linear(x.reshape(-1, width), half_rows, bias)
    return out.view(*x.shape[:-1], half_rows.size(0))
