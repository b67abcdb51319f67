"""Heads: what each head does in this sentence and which ones matter. Statistics per head (entropy,
confidence, offset, weight on </s> and punctuation) as a sortable table and as layer x head grids named by
role with the thresholds stated; the checkpoint's head importance (when its folder has head_importance.json);
and live ablation: switch heads off and see the translation again, against the original."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import numpy as np
import pandas as pd

from transformer.analysis.alignment import align, word_attention
from transformer.analysis.head_stats import BROAD_SPREAD, POSITION_SHARE, SINK_SHARE, head_stats
from transformer.core.head_ref import HeadRef, layer_label
from transformer.core.probes import ATTENTION_KINDS, PROBES

from ..figures.heads import head_grid
from ..figures.links import alignment_svg
from ..heads_off import format_heads_off
from ..text import literal
from .base import TRANSLATION, View, current_translation, translated

STATISTICS = {"spread": "spread (normalised entropy)", "max_weight": "confidence (mean max weight)",
              "mean_offset": "mean offset (key - query)", "eos_share": "weight on </s>",
              "punctuation_share": "weight on punctuation"}
THRESHOLDS = (
    f"Roles, checked in this order: *previous* / *next token* when ≥ {POSITION_SHARE:.0%} of "
    f"rows put their maximum one position back / ahead (not for cross-attention); *diagonal / alignment* "
    f"when ≥ {POSITION_SHARE:.0%} of maxima lie on the diagonal scaled to the two lengths; "
    f"*sink on {literal('</s>')}* (or {literal('<s>')}) when ≥ {SINK_SHARE:.0%} of the weight goes there; *broad* when "
    f"the spread is ≥ {BROAD_SPREAD}; else *mixed*."
)


class HeadsView(View):
    name, title = "heads", "Heads"
    controls = ("head_statistic",)
    reads = ("sentence",)

    def build(self, context):
        config = context.profile.config
        with gr.Row():
            statistic = gr.Dropdown([(v, k) for k, v in STATISTICS.items()], value="spread", label="Colour by",
                                    elem_id="head-statistic")
        gr.Markdown(THRESHOLDS)
        grids = gr.Plot(label="Heads of this sentence", elem_id="head-grids")
        split_grids = gr.Plot(label="The same over val (this checkpoint)", elem_id="head-grids-val")
        table = gr.Dataframe(label="Every head of this sentence (click a column to sort)", elem_id="head-table",
                             interactive=False)
        importance = gr.Plot(label="Head importance (val BLEU drop when masked alone)", elem_id="head-importance")
        faithfulness = gr.Markdown(elem_id="faithfulness-text")
        alignment_text = gr.Markdown(elem_id="alignment-text")
        alignment_links = gr.HTML("", elem_id="alignment-links")
        gr.Markdown("**Switch heads off** (Michel et al., 2019): their outputs are zeroed while the sentence is "
                    "translated again.")
        with gr.Row():
            toggles = {kind: gr.CheckboxGroup(head_choices_of(kind, config), label=PROBES[kind].title.split(" (")[0],
                                              elem_id=f"off-{kind}") for kind in ATTENTION_KINDS}
        ablate = gr.Button("Translate with these heads off", elem_id="ablate-button")
        ablation = gr.Markdown(elem_id="ablation-text")
        return {
            "head_statistic": statistic,
            "head_grids": grids,
            "head_grids_val": split_grids,
            "head_table": table,
            "head_importance": importance,
            "faithfulness_text": faithfulness,
            "alignment_text": alignment_text,
            "alignment_links": alignment_links,
            **{f"off_{kind}": box for kind, box in toggles.items()},
            "ablate_button": ablate,
            "ablation_text": ablation,
        }

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        out = {}
        if changed in ("model", TRANSLATION):
            profile = context.profiles[result.model_key if result else context.model_key]
            out["head_importance"] = importance_figure(profile)
            out["faithfulness_text"] = faithfulness_markdown(profile.faithfulness)
        if translation is None or changed not in (TRANSLATION, "sentence", "head_statistic"):
            return out
        out |= alignment_outputs(context.profiles[result.model_key].alignment, translation)
        per_kind = {kind: head_stats(translation.recorded[kind]) for kind in ATTENTION_KINDS}
        statistic = state.get("head_statistic") or "spread"
        shapes = kind_shapes(context.profiles[result.model_key].config)
        out["head_grids"] = grids_figure(per_kind, statistic, shapes, "Heads of this sentence")
        out["head_grids_val"] = split_figure(context.profiles[result.model_key].split_head_stats, statistic, shapes)
        out["head_table"] = pd.DataFrame([
            {**HeadRef(s.kind, s.layer, s.head).numbered(), "role": s.role, "entropy": round(s.entropy, 3),
             "spread": round(s.spread, 3), "confidence": round(s.max_weight, 3), "mean offset": round(s.mean_offset, 2),
             "on </s>": round(s.eos_share, 3), "on punctuation": round(s.punctuation_share, 3)}
            for kind in ATTENTION_KINDS for s in per_kind[kind]])
        return out

    def wire(self, ui):
        c = ui.components
        boxes = [c[f"off_{kind}"] for kind in ATTENTION_KINDS]

        def ablate(result, sentence, *chosen):
            translation = translated(result, {"sentence": sentence})
            heads_off = [HeadRef.parse(entry) for entries in chosen for entry in entries or []]
            changed = ui.service.rerun(result, translation, heads_off=heads_off)
            drop = (ui.service.output_log_prob(result, translation, heads_off)
                    - ui.service.output_log_prob(result, translation))
            return {
                c["ablation_text"]: (
                    f"**{len(heads_off)} head(s) off** ({literal(format_heads_off(heads_off)) or 'none'}).  \n"
                    f"**Original:** {literal(translation.text)}  \n"
                    f"**With them off:** {literal(changed.text) or '(empty)'}  \n"
                    f"Log-probability of the original output: {drop:+.3f} nats with them off "
                    f"({'the same' if changed.tgt_ids == translation.tgt_ids else 'a different'} output)."
                )
            }

        c["ablate_button"].click(ablate, [ui.result_state, c["sentence"], *boxes], [c["ablation_text"]],
                                 api_visibility="private")


def head_choices_of(kind: str, config) -> list[tuple[str, str]]:
    """Every head of one kind as a choice: shown "layer 3 head 2", its value the heads_off entry "cross 3 2"."""
    stack = config.stack_of(kind)
    heads = [HeadRef(kind, layer, head) for layer in range(stack.layers) for head in range(stack.heads)]
    return [(ref.label, ref.entry) for ref in heads]


def kind_shapes(config) -> dict[str, tuple[int, int]]:
    """(layers, heads) of each attention kind: its stack's, the encoder's and the decoder's may differ."""
    return {kind: (config.stack_of(kind).layers, config.stack_of(kind).heads) for kind in ATTENTION_KINDS}


def empty_grid(shapes: dict) -> tuple[np.ndarray, list[list[str]], dict[str, int]]:
    """The grids of every kind one under another, a blank row between kinds, as wide as the most heads: values
    (NaN: no such head), texts, and the row of each kind's first layer."""
    first, row = {}, 0
    for kind in ATTENTION_KINDS:
        first[kind] = row
        row += shapes[kind][0] + 1
    heads = max(h for _, h in shapes.values())
    values = np.full((row - 1, heads), np.nan)
    return values, [[""] * heads for _ in range(values.shape[0])], first


def split_figure(document: dict | None, statistic: str, shapes: dict):
    """The checkpoint's head statistics over a split (head_stats.json), drawn like the sentence's."""
    if not document:
        return None
    per_kind = {kind: [SimpleNamespace(**{**h, **HeadRef.from_numbered(h)._asdict()})
                       for h in document["heads"] if h["kind"] == kind] for kind in ATTENTION_KINDS}
    return grids_figure(per_kind, statistic, shapes, f"Over {document['split']} ({document['sentences']:,} sentences)")


def grids_figure(per_kind: dict, statistic: str, shapes: dict, title: str) -> object:
    values, texts, first = empty_grid(shapes)
    for kind in ATTENTION_KINDS:
        for s in per_kind[kind]:
            row = first[kind] + s.layer
            values[row, s.head] = getattr(s, statistic)
            texts[row][s.head] = s.role
    return head_grid(values, texts, grid_rows(shapes), f"{title}, coloured by {STATISTICS[statistic]}",
                     STATISTICS[statistic])


def grid_rows(shapes: dict) -> list[str]:
    """One row label per (kind, layer), a blank (but distinct) one between kinds."""
    names = {"encoder_self": "encoder self", "decoder_self": "decoder self", "cross": "cross"}
    rows = []
    for k, kind in enumerate(ATTENTION_KINDS):
        rows += [f"{names[kind]} · {layer_label(layer)}" for layer in range(shapes[kind][0])]
        if k < len(ATTENTION_KINDS) - 1:
            rows.append(" " * (k + 1))
    return rows


def importance_figure(profile):
    importance = getattr(profile, "head_importance", None)
    if not importance:
        return None
    shapes = kind_shapes(profile.config)
    values, texts, first = empty_grid(shapes)
    for entry in importance.get("heads", []):  # numbered from 1 in the file
        ref = HeadRef.from_numbered(entry)
        row, head = first[ref.kind] + ref.layer, ref.head
        values[row, head] = entry["bleu_drop"]
        texts[row][head] = f"{entry['bleu_drop']:+.2f}"
    return head_grid(values, texts, grid_rows(shapes), "Val BLEU drop when each head alone is switched off "
                     "(this checkpoint)", "BLEU drop", "Reds")


def alignment_outputs(report: dict | None, translation) -> dict:
    """The checkpoint's best alignment head, named with its AER, and its links for this sentence."""
    if not report:
        return {"alignment_text": "No alignment report for this checkpoint (`python -m transformer.analysis."
                                  "alignment_eval` writes one).", "alignment_links": ""}
    best = report["best_head"]
    best_ref = HeadRef.from_numbered({"kind": "cross", **best})
    weights = [r for r in report["table"] if r.get("measure", "weights") == "weights"]  # older reports: weights only
    layers = ", ".join(f"layer {r['layer']} {r['aer']:.3f}" for r in weights
                       if r["reading"] == "layer average" and r["method"] == "attention")
    shift = min((r for r in weights if r["method"] == "shift"), key=lambda r: r["aer"])
    by_norms = report.get("best_head_by_measure", {}).get("norms")
    norms = (f" Read as norm-based attention ‖α·f(x)‖ (Kobayashi et al., 2020), the best head is layer "
             f"{by_norms['attention']['layer']}, head {by_norms['attention']['head']} at "
             f"{by_norms['attention']['aer']:.3f} (Shift-Att {by_norms['shift']['aer']:.3f})." if by_norms else "")
    cross = translation.recorded["cross"]
    links = align(cross.values[best_ref.layer, best_ref.head], cross.rows, cross.cols)
    words = word_attention(cross.values[best_ref.layer, best_ref.head], cross.rows, cross.cols)
    reference = report["reference"]
    text = (
        f"**Best alignment head: cross-attention layer {best['layer']}, head {best['head']}**, alignment error rate "
        f"{best['aer']:.3f} on {report['split']} ({report['sentences']:,} sentences). Layer averages: {layers}; "
        f"best Shift-Att reading {shift['aer']:.3f}; a diagonal baseline {report['baseline']['aer']:.3f}.{norms} The "
        f"reference is {literal(reference['what'])}: {literal(reference['aligner'])} "
        f"{literal(str(reference['version']))}. "
        "Its links for this sentence:"
    )
    return {"alignment_text": text, "alignment_links": alignment_svg(words.src_words, words.tgt_words, links)}


def faithfulness_markdown(report: dict | None) -> str:
    """The checkpoint's deletion test (faithfulness.json) as a table, most faithful first."""
    if not report:
        return ("**Which explanation to trust?** No deletion test for this checkpoint "
                "(`python -m transformer.analysis.faithfulness` writes one).")
    rows = sorted(report["table"], key=lambda row: -row["aopc"])
    lines = ["| method | AOPC | log-probability after deleting 0, 1, 2, … source pieces |", "|---|---|---|"]
    lines += [
        f"| {row['method']} | **{row['aopc']:.3f}** | {', '.join(f'{v:.2f}' for v in row['curve'])} |" for row in rows
    ]
    return (f"**Which explanation to trust?** Deleting the source pieces a method calls most important (replaced by "
            f"`<unk>`) should hurt the produced word most: AOPC is the mean drop in its log-probability over 1–"
            f"{report['steps']} deletions, on {report['sentences']} {literal(report['split'])} sentences "
            f"({report['pieces']:,} output pieces). Higher is more faithful; a method below random says little.\n\n"
            + "\n".join(lines))
