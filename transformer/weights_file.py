"""A safetensors file read straight into a model's tensors, one at a time, with plain reads.

The safetensors library reads through a memory map: every page a tensor is copied from counts toward the process's
resident memory until the file is closed, so loading a 2.4 GB model (NLLB-200's 600M parameters) peaked near twice
that. Here the file's header, as the format documents it (8 bytes of little-endian length, then JSON naming each
tensor's dtype, shape and byte range after the header), is read and checked, and each tensor's bytes go by
`readinto` into the memory of the tensor that keeps them: loading peaks at the model's own size. Writing, and every
other read in the project, go through the safetensors library; nothing here unpickles.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
MAX_HEADER = 100_000_000  # the safetensors library's own bound on the header


class WeightsFile:
    """An open safetensors file: `shapes` by name, `read_into(name, tensor)`, `read(name)`. Every problem is a
    ValueError naming what is wrong (a truncated file, a header that is not the format's)."""

    def __init__(self, path):
        self.path = Path(path)
        self.file = self.path.open("rb")
        try:
            self.entries, self.start = self._header()
        except BaseException:
            self.file.close()
            raise

    def _header(self) -> tuple[dict, int]:
        size = self.path.stat().st_size
        prefix = self.file.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if not 0 < length <= min(MAX_HEADER, size - 8):
            raise ValueError("the header's length does not fit the file")
        try:
            header = json.loads(self.file.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"the header is not JSON ({error})") from None
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        header.pop("__metadata__", None)
        for name, entry in header.items():
            dtype = DTYPES.get(entry.get("dtype")) if isinstance(entry, dict) else None
            if dtype is None:
                raise ValueError(f"tensor {name!r}: dtype {entry.get('dtype') if isinstance(entry, dict) else entry!r} "
                                 f"is not one of {sorted(DTYPES)}")
            begin, end = entry.get("data_offsets", (0, -1))
            expected = math.prod(entry.get("shape", [])) * torch.empty(0, dtype=dtype).element_size()
            if end - begin != expected or begin < 0 or 8 + length + end > size:
                raise ValueError(f"tensor {name!r}: its bytes do not fit the file (truncated?)")
        return header, 8 + length

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(entry["shape"]) for name, entry in self.entries.items()}

    def read_into(self, name: str, tensor: torch.Tensor) -> None:
        """The tensor's bytes into `tensor` (of the file's shape), converted where the dtypes differ."""
        entry = self.entries[name]
        dtype = DTYPES[entry["dtype"]]
        target = tensor if dtype == tensor.dtype and tensor.is_contiguous() else torch.empty(tensor.shape, dtype=dtype)
        begin, end = entry["data_offsets"]
        self.file.seek(self.start + begin)
        raw = target.detach().reshape(-1).view(torch.uint8).numpy()  # the tensor's own memory, as bytes
        if target.numel() and self.file.readinto(raw) != end - begin:
            raise ValueError(f"tensor {name!r}: the file ends inside it (truncated)")
        if target is not tensor:
            tensor.copy_(target)

    def read(self, name: str) -> torch.Tensor:
        entry = self.entries[name]
        tensor = torch.empty(entry["shape"], dtype=DTYPES[entry["dtype"]])
        self.read_into(name, tensor)
        return tensor

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> "WeightsFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
