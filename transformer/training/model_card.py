"""Markdown model card from a checkpoint's metrics.json, so docs/model-cards.md states exactly what was measured.

    python -m transformer.model_card --checkpoint checkpoints/en-de
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..checkpoint import read_metrics
from ..command_line import CommandParser
from ..core.config import ModelConfig
from ..corpus.mix import corpora_described


def distilled_by(made: dict) -> str:
    """How a student's training split was made by transformer.distill, from the record it leaves, and how to remake
    it (the targets are not shipped)."""
    teacher, translation = made["teacher"], made["translation"]
    shape, trained = teacher.get("model") or {}, teacher.get("training") or {}
    scores = ", ".join(f"{name} {s['bleu']}" for name, s in (teacher.get("scores") or {}).items())
    return (f": the training sources with a teacher's translations as targets"
            f"{' and the original pairs' if made['with_references'] else ''} (sequence-level knowledge distillation, "
            f"Kim & Rush, 2016). The teacher: {teacher.get('parameters') or 0:,} parameters (d_model "
            f"{shape.get('d_model', '?')}, {shape.get('n_layers', '?')} layers), "
            f"{trained.get('wall_minutes', '?')} min on {trained.get('hardware', '?')} "
            f"(`{trained.get('command', '?')}`), beam BLEU {scores or '?'}; it "
            f"translated with beam {translation['beam_size']}, length penalty {translation['length_penalty']}, in "
            f"{translation['seconds'] / 60:.1f} min on {translation['hardware']}. The targets are not shipped: "
            f"`bash scripts/distill_gpu.sh` remakes them on a GPU and "
            f"`{made.get('student_command') or 'python -m transformer.distill student'}` the training folder "
            f"(docs/training.md)")


def grown_by(data: dict) -> str:
    """How a training split grown by transformer.diversify or distilled by transformer.distill was made, from the
    record it leaves."""
    if "distilled" in data:
        return distilled_by(data["distilled"])
    if "diversified" not in data:
        return ""
    made = data["diversified"]
    return (f": the {made['train_lines']['original']:,} original pairs, the same sources translated by "
            f"`{made['forward']['checkpoint']}` ({made['forward']['strategy']}) and the targets back-translated by "
            f"`{made['backward']['checkpoint']}` ({made['backward']['strategy']}), built by `transformer.diversify`")


def training_stages(metrics: dict) -> list[dict]:
    """Every stage that trained these weights, first to last: the stages before a warm start (`earlier_stages`,
    carried over from the checkpoint it started from) and this run's own `training`."""
    return [*metrics.get("earlier_stages", []), metrics.get("training", {})]


def stage_line(stage: dict) -> str:
    """One stage in a sentence: where it started, how long, on what."""
    start = f"a warm start from {stage['init_from']}" if stage.get("init_from") else "from random weights"
    updates = stage.get("updates")
    command = f", by `{stage['command']}`" if stage.get("command") else ""
    return (f"{start}: {stage.get('epochs_run', '?')} epochs, {f'{updates:,}' if isinstance(updates, int) else '?'} "
            f"updates in {stage.get('wall_minutes', '?')} min on {stage.get('hardware', '?')} "
            f"(torch {stage.get('torch', '?')}){command}")


def model_card(metrics: dict, checkpoint: str, title: bool = True) -> str:
    """The card in Markdown; `title=False` leaves out its heading, for a page whose own section names the checkpoint
    (docs/model-cards.md, written by scripts/write_model_cards.py)."""
    model, training, scores = metrics["model"], metrics["training"], metrics["scores"]
    decoding = metrics["decoding"]
    lines = [f"### Model card: `{checkpoint}`", ""] if title else []
    lines += [
        f"- **Architecture**: encoder-decoder Transformer, {ModelConfig.from_dict(model).stacks_text()}, d_model "
        f"{model['d_model']}, {model['norm']}-norm"
        f"{' with a final LayerNorm per stack' if model['final_norm'] else ''}, {model['pos_encoding']} positions, "
        f"dropout {model['dropout']}, {'shared source/target embeddings, ' if model['share_embeddings'] else ''}"
        f"{'output projection tied to the embedding, ' if model['tie_output'] else ''}"
        f"**{metrics['parameters']:,} parameters**; weights stored as {metrics['weights_dtype']} "
        f"(val BLEU cost of half precision: {metrics['fp16_val_bleu_cost']}).",
        f"- **Data**: {metrics['data']['train']['lines']:,} training sentence pairs "
        f"({', '.join(Path(f).name for f in metrics['data']['train']['files'])}{grown_by(metrics['data'])}); "
        f"val ({metrics['data']['val']['lines']:,} pairs) for model selection; the test split only reported.",
        f"- **Corpora**: {corpora_described(metrics['data'])}.",
        f"- **Tokenizer**: joint {metrics['tokenizer']['type']} vocabulary of {metrics['tokenizer']['vocab_size']:,} "
        f"pieces trained on the {metrics['tokenizer']['trained_on']}, byte fallback for unseen characters.",
        f"- **Training, {len(training_stages(metrics))} stage(s)**: "
        + "; then ".join(f"stage {number}, {stage_line(stage)}"
                         for number, stage in enumerate(training_stages(metrics), start=1)) + ".",
        f"- **Last stage's settings**: {training['epochs_run']} epochs, {training['updates']:,} updates of "
        f"≤{training['max_tokens']:,} tokens, Adam (0.9, 0.98, 1e-9), peak lr {training['lr']} after "
        f"{training['warmup']} warm-up updates then 1/√step, label smoothing {training['label_smoothing']}, gradient "
        f"clipping {training['clip_norm']}, bfloat16 autocast; **{training['wall_minutes']} min** on "
        f"{training['hardware']} (torch {training['torch']}).",
        f"- **Final weights**: {metrics['selection']['kind']} of epoch(s) {metrics['selection']['epochs']} "
        f"(greedy val BLEU {metrics['selection']['val_bleu']})"
        + (f": {metrics['selection']['note']}." if metrics['selection'].get("note") else "."),
        f"- **Decoding for the scores**: {decoding['strategy']}, beam {decoding['beam_size']}, length penalty "
        f"{decoding['length_penalty']}.",
    ]
    sweep = metrics.get("length_penalty_sweep")
    if sweep:
        tried = ", ".join(f"{value} → {bleu}" for value, bleu in sweep["bleu"].items())
        lines.append(
            f"- **Length penalty chosen on {sweep['split']}** (beam {sweep['beam_size']}, BLEU by value): {tried}."
        )
    lines += ["", "| split | BLEU | chrF | sentences |", "|---|---|---|---|"]
    lines += [f"| {split} | **{s['bleu']}** | {s['chrf']} | {s['sentences']:,} |" for split, s in scores.items()]
    any_scores = next(iter(scores.values()))
    lines += [
        "",
        f"sacreBLEU signatures: BLEU `{any_scores['bleu_signature']}`, chrF `{any_scores['chrf_signature']}`.",
        "",
        "Validation after each epoch of the last stage (greedy decoding):",
        "",
        "| epoch | updates | train loss | val loss | val BLEU | val chrF | minutes |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {e['epoch']} | {e['updates']:,} | {e['train_loss']:.3f} | {e['val_loss']:.3f} | {e['val_bleu']} | "
              f"{e['val_chrf']} | {e['minutes']:.1f} |" for e in metrics["epochs"]]
    if training.get("init_from"):  # one command redoes only the last stage of a warm-started model
        lines += ["", f"Reproduce the last stage, a warm start from `{training['init_from']}`: `{training['command']}`"]
    else:
        lines += ["", f"Reproduce: `{training['command']}`"]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = CommandParser(prog="python -m transformer.model_card", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="checkpoints/en-de")
    args = parser.parse_args(argv)
    metrics = read_metrics(args.checkpoint)
    if metrics is None:
        parser.error(f"{args.checkpoint} has no metrics.json")
    print(model_card(metrics, args.checkpoint))


if __name__ == "__main__":
    main()
