"""Linear layers that read a float16 copy of their weights when decoding one or a few rows on the CPU.

Why: a decoding step multiplies 1 to 4 rows by every weight matrix, so on the CPU its speed is the speed of
reading the weights (17.6 MB in float32 per step), and on machines whose cache does not hold them that is
most of a step. The shipped checkpoints store their weights in float16 (checkpoint.py), so a float16 copy
holds exactly the same values in half the bytes. PyTorch has no CPU matmul of float32 inputs with float16
weights, so `half_linear.cpp` (with `half_linear.h`) widens each weight to float32 in registers and accumulates in
float32: its results match `F.linear` to float32 rounding (~3e-7 relative). Running the whole model in
float16 instead is as fast but changed 8 of the 1,014 val translations, and BLEU.

The kernel is compiled with torch.utils.cpp_extension the first time a model switches this on (about a minute,
by a builder process that a background thread waits for, cached under ~/.cache/torch_extensions: kernel_build.py;
`pip install` users can build it ahead with `attention-explorer-build-kernel`); until then, and wherever
it cannot be built (no compiler, no AVX2/F16C, ATTENTION_EXPLORER_HALF_WEIGHTS=0), every layer runs `F.linear`.

    model.use_half_weights(True)     # Transformer; Translator.from_pretrained does this on the CPU
    project(x, module.fc1)           # what the layers call instead of F.linear
"""
from __future__ import annotations

import atexit
import logging
import sys
import threading
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .kernel_build import EXTENSION, SWITCH, KernelFolderError, build_folder, compile_kernel, stop_builder

__all__ = ["EXTENSION", "KERNEL", "MAX_ROWS", "SWITCH", "attach_half_weights", "build_folder", "detach_half_weights",
           "project"]

log = logging.getLogger(__name__)
# measured on a 2-core CPU: 1 row 7x faster than F.linear, 4 rows 3x, 16 rows even; beyond that the
# float32 matmul, which reuses each weight across rows, wins
MAX_ROWS = 8


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
        atexit.register(self._finish_at_exit)  # a short script's exit waits for the build, never orphans it
        threading.Thread(target=self._build, name="half-linear-build", daemon=True).start()

    def wait(self, timeout: float | None = None):
        """The compiled module, or None if it could not be built (see `status`) or is still building."""
        self.start()
        self._done.wait(timeout)
        return self.module

    def _finish_at_exit(self) -> None:
        """A process that ends while the build runs waits for it, so the build is never cut half-way and the next
        run loads it. Ctrl+C stops the build instead."""
        if self._done.wait(10):  # finding a kernel built earlier takes seconds on a busy machine: nothing to say
            return
        print("attention-explorer: finishing the float16 kernel's build before exiting (once: later runs load it "
              f"from {build_folder()}; Ctrl+C stops it)...", file=sys.stderr, flush=True)
        try:
            self._done.wait()
        except KeyboardInterrupt:
            stop_builder()

    def _build(self) -> None:
        try:
            self.module, self.status = compile_kernel(), "ready"
        except KernelFolderError as error:  # a folder that cannot be written: said once, in its one line
            self.status = f"unavailable: {error}"
            log.warning("%s", error)
        except Exception as error:  # any failure leaves the float32 path, which is always correct
            self.status = f"unavailable: {type(error).__name__}: {str(error).strip()[:300]}"
        finally:
            self._done.set()


KERNEL = KernelBuild()


def attach_half_weights(model: nn.Module) -> int:
    """Gives every nn.Linear whose weight float16 holds exactly a float16 copy (`half_weight`); returns how
    many. Weights that float16 would round (a model in training) keep none, so their results never change."""
    attached = 0
    for module in model.modules():
        if isinstance(module, nn.Linear):
            weight = module.weight.detach()
            # a few rows first: a model's float32 weights (a converted one's) fail there, before a whole copy is made
            exact = (weight.device.type == "cpu" and weight.dtype == torch.float32
                     and torch.equal(weight[:8].to(torch.float16).float(), weight[:8]))
            half = weight.to(torch.float16) if exact else None
            # compared a block of rows at a time: a whole float32 copy of a large vocabulary's matrix is 1 GB
            exact = exact and all(torch.equal(half[i:i + 4096].float(), weight[i:i + 4096])
                                  for i in range(0, weight.size(0), 4096))
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
