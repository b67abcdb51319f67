"""The model as a table: every module with the shape of its output on a real input and its parameters.

The shapes come from forward hooks on one teacher-forced pass, so they are what actually flowed.
"""
from __future__ import annotations

import torch

from .model import Transformer


def _shape(value) -> str:
    if isinstance(value, torch.Tensor):
        return "×".join(str(s) for s in value.shape)
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return ", ".join(_shape(v) for v in value)
    return ""


@torch.inference_mode()
def architecture_rows(model: Transformer, src_ids: list[int], decoder_input_ids: list[int]) -> list[dict]:
    """One row per module in registration order: name, type, output shape (batch 1), own parameters."""
    shapes: dict[str, str] = {}
    handles = []
    for name, module in model.named_modules():
        def record(mod, inputs, output, name=name):
            shapes.setdefault(name, _shape(output))
        handles.append(module.register_forward_hook(record))
    try:
        model(torch.tensor([src_ids], device=model.device), torch.tensor([decoder_input_ids], device=model.device))
    finally:
        for handle in handles:
            handle.remove()
    rows, seen = [], set()
    for name, module in model.named_modules():
        own = [p for p in module.parameters(recurse=False) if id(p) not in seen]
        seen.update(id(p) for p in own)
        rows.append({
            "module": name or "(model)", "type": type(module).__name__, "output shape": shapes.get(name, ""),
            "parameters": sum(p.numel() for p in own),
            "parameter shapes": ", ".join("×".join(map(str, p.shape)) for p in own),
        })
    return rows
