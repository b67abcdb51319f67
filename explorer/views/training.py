"""Training: how attention formed while the model learned. An epoch slider shows a probe sentence's
translation at that epoch and the chosen layer and head's attention as it was then, beside the train
loss and val BLEU curves with that epoch marked. The data is the checkpoint's timeline, recorded during
training (transformer/training/timeline.py); a checkpoint without one says so."""
from __future__ import annotations

import gradio as gr

from transformer.core.head_ref import layer_label
from transformer.core.probes import ATTENTION_KINDS, PROBES
from transformer.training.timeline import stage_label

from .. import figures
from ..components import Radio, Slider
from ..text import literal
from .base import MODEL, View, plot_row
from .selection import MEAN, OVERVIEW, head_name, select_heads, single_layer_and_head

NO_TIMELINE = ("This checkpoint ships no training timeline. Train with `python -m transformer.train` (it records one "
               "after every epoch) to see attention form epoch by epoch.")


class TrainingView(View):
    name, title = "training", "Training"
    controls = ("timeline_epoch", "timeline_sentence", "timeline_kind")
    reads = ("layer", "head")

    def build(self, context):
        timeline = context.profile.timeline
        with gr.Row():
            epoch = Slider(1, max(2, len(timeline.epochs) if timeline else 2), value=1, step=1, label="Epoch",
                           elem_id="timeline-epoch")
            sentence = gr.Dropdown(sentence_choices(timeline), value=0, label="Probe sentence",
                                   elem_id="timeline-sentence")
            kind = Radio([(PROBES[k].title.split(" (")[0], k) for k in ATTENTION_KINDS], value="cross",
                         label="Attention", elem_id="timeline-kind")
        text = gr.Markdown(elem_id="timeline-text")
        plots = plot_row(timeline_attention=("Attention at this epoch", "timeline-attention"),
                         timeline_curves=("Loss and BLEU", "timeline-curves"))
        return {"timeline_epoch": epoch, "timeline_sentence": sentence, "timeline_kind": kind, "timeline_text": text,
                **plots}

    def render(self, result, state, context, changed):
        if changed not in (MODEL, "layer", "head", *self.controls):
            return {}  # a new translation changes nothing here
        timeline = context.profile.timeline
        if timeline is None or not timeline.epochs:
            return {"timeline_text": NO_TIMELINE, "timeline_attention": None, "timeline_curves": None}
        epochs = [e["epoch"] for e in timeline.epochs]
        out = {}
        epoch, sentence = state.get("timeline_epoch"), int(state.get("timeline_sentence") or 0)
        if changed == MODEL or epoch not in epochs:
            epoch = epochs[0]
            out["timeline_epoch"] = gr.update(minimum=epochs[0], maximum=epochs[-1], value=epoch)
            out["timeline_sentence"] = gr.update(choices=sentence_choices(timeline), value=sentence)
        entry = next(e for e in timeline.epochs if e["epoch"] == epoch)
        output = entry["outputs"][sentence]
        out["timeline_text"] = (
            f"**Epoch {epoch}**{stage_text(timeline, epoch)} (train loss {entry['train_loss']:.3f}, "
            f"val BLEU {entry['val_bleu']}): "
            f"{literal(timeline.sentences[sentence])} → **{literal(output['text']) or '(empty)'}**"
        )
        weights, rows, cols = timeline.attention(epoch, sentence, state.get("timeline_kind") or "cross")
        layer, head = single_layer_and_head(state.get("layer") or OVERVIEW, state.get("head") or MEAN,
                                            weights.shape[:2])
        kind_title = PROBES[state.get("timeline_kind") or "cross"].title
        out["timeline_attention"] = figures.attention_heatmap(
            select_heads(weights, layer, head), rows, cols,
            f"Epoch {epoch}: {kind_title}, {layer_label(layer)}, {head_name(head, weights.shape[1])}")
        out["timeline_curves"] = figures.training_curves(epochs, [e["train_loss"] for e in timeline.epochs],
                                                         [e["val_bleu"] for e in timeline.epochs], epoch,
                                                         f"Learning curves (epoch {epoch} marked)",
                                                         [(stage["first_epoch"], stage_name(timeline, number))
                                                          for number, stage in enumerate(timeline.stages, 1)
                                                          if number > 1])
        return out


def sentence_choices(timeline) -> list[tuple[str, int]]:
    return [(f"{i + 1}: {s}", i) for i, s in enumerate(timeline.sentences)] if timeline else [("(no timeline)", 0)]


def stage_text(timeline, epoch: int) -> str:
    """Where an epoch sits in the model's training stages; empty for a timeline of one stage recorded from scratch."""
    stage = timeline.stage_of(epoch)
    if stage is None or (len(timeline.stages) == 1 and stage["label"] == stage_label(init_from=None)):
        return ""
    place = f"epoch {stage['epoch_in_stage']} of {stage['epochs_in_stage']}"
    name = stage_name(timeline, stage["number"])
    return f", {name + ', its ' if name else ''}{place}: {literal(stage['label'])}"


def stage_name(timeline, number: int) -> str | None:
    """A stage's own name where the timeline gives one (its earlier stages may be unrecorded), else its place."""
    stage = timeline.stages[number - 1]
    return stage.get("name") or (f"stage {number}" if len(timeline.stages) > 1 else None)
