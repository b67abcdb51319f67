"""What the recorded attention says, computed from a Translation (decoding/trace.py) or the model itself.

    head_stats.py    per-head entropy, focus, positional offset, sink and punctuation shares, and a role name
                     for every head; averaged over many translations
    rollout.py       attention rollout (Abnar & Zuidema, 2020) through the encoder and on through cross-attention
    attribution.py   input x gradient of every output piece's log-probability with respect to the source embeddings
    alignment.py     word alignments from cross-attention (Garg et al., 2019; Shift-Att, Chen et al., 2020), AER,
                     and the Pharaoh "i-j" format

Commands that score the shipped models over a whole split and write a JSON file into the checkpoint folder:

    importance.py         python -m transformer.analysis.importance: BLEU and reference log-likelihood lost when
                          each head alone is switched off, and the pruning curve (-> head_importance.json)
    alignment_eval.py     python -m transformer.analysis.alignment_eval: AER of every cross-attention head and
                          layer against a statistical aligner (-> alignment.json), with
    symmetrize.py         grow-diag-final and intersection of two one-directional alignments, and
    statistical_aligner.py  eflomal, an evaluation-only dependency (requirements-eval.txt)

The analyses the explorer runs on a translation are plug-ins: registry.py says how one is declared (what it needs
recorded, a function to a typed result, cheap or on demand) and how switched-off heads reach every one of them;
registered.py holds one registration line per analysis.

Switching heads off while translating (head masking) lives with the model: core/head_mask.py, and
`Translator.translate(..., heads_off=[(kind, layer, head), ...])`.
"""
from . import registered
from .alignment import (
                        WordAlignment,
                        alignment_error_rate,
                        corpus_alignment_error_rate,
                        read_pharaoh,
                        translation_alignment,
                        write_pharaoh,
)
from .attribution import Attribution, attribute, input_x_gradient
from .head_stats import HeadStats, aggregate_head_stats, corpus_head_stats, head_role, head_stats
from .registry import ANALYSES, Analysis, ModelAccess, register, run_analysis, unregister
from .rollout import Rollout, rollout

__all__ = ["ANALYSES", "Analysis", "Attribution", "HeadStats", "ModelAccess", "Rollout", "WordAlignment",
           "aggregate_head_stats", "alignment_error_rate", "attribute", "corpus_alignment_error_rate",
           "corpus_head_stats", "head_role", "head_stats", "input_x_gradient", "read_pharaoh", "register",
           "registered", "rollout", "run_analysis", "translation_alignment", "unregister", "write_pharaoh"]
