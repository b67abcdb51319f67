"""A reference word alignment from a statistical aligner, eflomal (Östling & Tiedemann, 2017: IBM model 1, then an
HMM, then fertility, trained by Gibbs sampling), to score cross-attention alignments against when no human
annotation exists.

eflomal is an evaluation-only dependency (requirements-eval.txt): nothing the app or the tests need imports this
module. Its sampler takes no seed, so two runs may differ in a few links.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .alignment import Alignment, read_pharaoh


class AlignerMissing(RuntimeError):
    """eflomal is not installed; the message says how to install it."""


@dataclass
class EflomalSettings:
    """eflomal's own defaults (its `eflomal-align` command line)."""

    model: int = 3  # 1 = IBM1, 2 = + HMM, 3 = + fertility
    n_samplers: int = 3  # independent samplers whose counts are averaged
    null_prior: float = 0.2  # prior probability of a word aligned to nothing
    rel_iterations: float = 1.0  # iterations relative to eflomal's default for the corpus size


def eflomal_version() -> str:
    try:
        return metadata.version("eflomal")
    except metadata.PackageNotFoundError:
        raise AlignerMissing("eflomal is not installed: pip install -r requirements-eval.txt "
                             "(it builds from source with the system C compiler)") from None


def eflomal_links(source_lines: Sequence[str], target_lines: Sequence[str],
                  settings: EflomalSettings | None = None) -> tuple[list[Alignment], list[Alignment]]:
    """Aligns line i of `source_lines` with line i of `target_lines` (whitespace-separated words; eflomal
    lowercases them). Returns the forward and reverse alignments, both as (source word, target word) pairs."""
    eflomal_version()
    from eflomal import Aligner  # imported here: the package must import without it

    if len(source_lines) != len(target_lines):
        raise ValueError(f"{len(source_lines)} source lines but {len(target_lines)} target lines")
    settings = settings or EflomalSettings()
    aligner = Aligner(model=settings.model, n_samplers=settings.n_samplers, null_prior=settings.null_prior,
                      rel_iterations=settings.rel_iterations)
    with tempfile.TemporaryDirectory(prefix="eflomal-") as folder:
        forward, reverse = Path(folder) / "forward.links", Path(folder) / "reverse.links"
        aligner.align([line + "\n" for line in source_lines], [line + "\n" for line in target_lines],
                      links_filename_fwd=str(forward), links_filename_rev=str(reverse), quiet=True)
        return read_pharaoh(forward), read_pharaoh(reverse)


__all__ = ["AlignerMissing", "EflomalSettings", "eflomal_links", "eflomal_version"]
