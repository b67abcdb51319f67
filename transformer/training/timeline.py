"""Attention across training: after every epoch, 8 fixed probe sentences of our own (in no corpus split)
are translated greedily with every attention map recorded, next to that epoch's train loss and val BLEU.

Stored beside the checkpoint as timeline.json (texts, tokens, curves) and timeline.safetensors (the maps,
float16, keyed "epoch/sentence/kind"), so a class can ask "did it know this at epoch 1?".

    python -m transformer.training.timeline --checkpoint checkpoints/en-de --epochs-dir RUN/epochs
rebuilds a timeline from per-epoch weights saved with `train --save-epochs` and the epochs in metrics.json.

    python -m transformer.training.timeline --checkpoint checkpoints/en-de --prepend RUNS/earlier-stage
puts an earlier stage's timeline in front of a warm-started checkpoint's, so the story starts where training did.

    python -m transformer.training.timeline --checkpoint checkpoints/en-de \
        --stage 1 "stage 2" "a warm start from stage 1" --stage 24 "stage 3" "on the diversified split"
names the stages of a timeline recorded before timelines kept them (a run records its own since).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..command_line import CommandParser, number_type
from ..core.probes import ATTENTION_KINDS
from ..decoding.translator import Translator
from ..paths import portable_path

TIMELINE_JSON, TIMELINE_TENSORS = "timeline.json", "timeline.safetensors"
PROBE_SENTENCES = {  # written for this project and in no corpus split: four everyday sentences, four captions
    "en": ["I left my umbrella at the train station.", "Could you tell me where the museum is?",
           "We are going to visit my grandmother tomorrow.", "She has been learning German for three years.",
           "A woman with a red umbrella walks past a bakery.", "Two boys are throwing snowballs at each other.",
           "An old man feeds pigeons on a bench.", "A chef is cutting vegetables in a small kitchen."],
    "de": ["Ich habe meinen Regenschirm am Bahnhof vergessen.", "Können Sie mir sagen, wo das Museum ist?",
           "Wir besuchen morgen meine Großmutter.", "Sie lernt seit drei Jahren Deutsch.",
           "Eine Frau mit einem roten Regenschirm geht an einer Bäckerei vorbei.",
           "Zwei Jungen werfen Schneebälle aufeinander.", "Ein alter Mann füttert Tauben auf einer Bank.",
           "Ein Koch schneidet Gemüse in einer kleinen Küche."],
}
MAX_PROBE_LENGTH = 40  # output pieces per probe sentence, so an untrained model's babble stays small


@dataclass
class Timeline:
    sentences: list[str]
    # epoch, train_loss, val_bleu, outputs: [{text, src, tgt, labels: {kind: [row labels, column labels]}}]
    epochs: list[dict] = field(default_factory=list)
    maps: dict[str, torch.Tensor] = field(default_factory=dict)  # "epoch/sentence/kind" -> (L, H, rows, cols) fp16
    # the training stages the epochs span, [{first_epoch, label, name?}] in order: a warm-started model's epoch 1 is
    # not a first look at the data, and the view has to say what came before it. `name` is optional ("stage 2"
    # where stage 1 was never recorded); without it a stage is named by its place
    stages: list[dict] = field(default_factory=list)

    def record(self, translator: Translator, epoch: int, train_loss: float, val_bleu: float) -> None:
        was_training = translator.model.training
        translator.model.eval()
        outputs = translator.translate_batch(
            self.sentences, strategy="greedy", max_length=MAX_PROBE_LENGTH, capture=True
        )
        translator.model.train(was_training)
        self.epochs = [e for e in self.epochs if e["epoch"] != epoch]
        self.epochs.append({"epoch": epoch, "train_loss": round(train_loss, 4), "val_bleu": val_bleu, "outputs": [
            {"text": o.text, "src": o.src_tokens, "tgt": o.tgt_tokens,
             "labels": {kind: [o.recorded[kind].rows, o.recorded[kind].cols] for kind in ATTENTION_KINDS}}
            for o in outputs]})
        self.epochs.sort(key=lambda e: e["epoch"])
        for index, output in enumerate(outputs):
            for kind in ATTENTION_KINDS:
                self.maps[f"{epoch}/{index}/{kind}"] = torch.from_numpy(output.recorded[kind].values).half()

    def save(self, folder) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        data = {"sentences": self.sentences, "stages": self.stages, "epochs": self.epochs}
        (folder / TIMELINE_JSON).write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        save_file({k: v.contiguous() for k, v in self.maps.items()}, str(folder / TIMELINE_TENSORS))

    @classmethod
    def load(cls, folder) -> "Timeline | None":
        folder = Path(folder)
        if not (folder / TIMELINE_JSON).is_file() or not (folder / TIMELINE_TENSORS).is_file():
            return None
        data = json.loads((folder / TIMELINE_JSON).read_text(encoding="utf-8"))
        return cls(data["sentences"], data["epochs"], load_file(str(folder / TIMELINE_TENSORS)), data.get("stages", []))

    def attention(self, epoch: int, sentence: int, kind: str):
        """(weights (L, H, rows, cols) float32, row labels, column labels) of one probe sentence at one epoch."""
        output = next(e for e in self.epochs if e["epoch"] == epoch)["outputs"][sentence]
        rows, cols = output["labels"][kind]
        return self.maps[f"{epoch}/{sentence}/{kind}"].float().numpy(), rows, cols

    def stage_of(self, epoch: int) -> dict | None:
        """The stage an epoch belongs to, with its number (from 1) and the epoch's place in it; None without stages."""
        started = [(number, stage) for number, stage in enumerate(self.stages, 1) if stage["first_epoch"] <= epoch]
        if not started:
            return None
        number, stage = started[-1]
        later = [s["first_epoch"] for s in self.stages[number:]]
        last = (later[0] - 1) if later else max(e["epoch"] for e in self.epochs)
        return {**stage, "number": number, "epoch_in_stage": epoch - stage["first_epoch"] + 1,
                "epochs_in_stage": last - stage["first_epoch"] + 1}

    def up_to(self, last_epoch: int) -> "Timeline":
        """The epochs up to `last_epoch` with their maps and stages: a long earlier stage can be cut to fit the file."""
        epochs = [e for e in self.epochs if e["epoch"] <= last_epoch]
        maps = {key: weights for key, weights in self.maps.items() if int(key.split("/", 1)[0]) <= last_epoch}
        return Timeline(list(self.sentences), epochs, maps, [s for s in self.stages if s["first_epoch"] <= last_epoch])

    @classmethod
    def for_language(cls, language: str, stage_label: str | None = None) -> "Timeline":
        stages = [{"first_epoch": 1, "label": stage_label}] if stage_label else []
        return cls(list(PROBE_SENTENCES.get(language, PROBE_SENTENCES["en"])), stages=stages)


def stage_label(init_from: str | None, data: str | None = None) -> str:
    """How a run started, in words, for the timeline it records; `data` names a training split other than the
    default."""
    start = f"a warm start from {portable_path(init_from)}" if init_from else "from scratch"
    return f"{start}, trained on {portable_path(data)}" if data else start


def concatenate(earlier: Timeline, later: Timeline) -> Timeline:
    """`later`'s epochs renumbered to follow `earlier`'s: one timeline across the stages of a warm-started model."""
    if earlier.sentences != later.sentences:
        raise ValueError("the two timelines translate different probe sentences; only one language pair's stages join")
    offset = max((e["epoch"] for e in earlier.epochs), default=0)
    epochs = [dict(e) for e in earlier.epochs] + [{**e, "epoch": e["epoch"] + offset} for e in later.epochs]
    maps = dict(earlier.maps)
    for key, weights in later.maps.items():
        epoch, rest = key.split("/", 1)
        maps[f"{int(epoch) + offset}/{rest}"] = weights
    stages = [dict(s) for s in earlier.stages] + [{**s, "first_epoch": s["first_epoch"] + offset} for s in later.stages]
    return Timeline(list(earlier.sentences), epochs, maps, stages)


def already_prepended(earlier: Timeline, later: Timeline) -> bool:
    """A second --prepend would put the earlier stage in twice; its epochs at the front of `later` give it away."""
    head = later.epochs[: len(earlier.epochs)]
    def fingerprint(entries):
        return [(e["epoch"], e["train_loss"], [o["text"] for o in e["outputs"]]) for e in entries]
    return len(later.epochs) > len(earlier.epochs) and fingerprint(head) == fingerprint(earlier.epochs)


def prepend(checkpoint, earlier_folder, first_epochs: int | None = None) -> Timeline:
    """`first_epochs`: put only the earlier stage's first epochs in front (where attention forms), so the joined
    timeline stays a small file."""
    earlier, later = Timeline.load(earlier_folder), Timeline.load(checkpoint)
    for folder, timeline in ((earlier_folder, earlier), (checkpoint, later)):
        if timeline is None:
            raise SystemExit(f"{folder}: has no {TIMELINE_JSON} and {TIMELINE_TENSORS}")
    if first_epochs is not None:
        recorded = [e["epoch"] for e in earlier.epochs]
        if first_epochs not in recorded:
            raise SystemExit(f"--prepend-epochs must name one of {earlier_folder}'s epochs "
                             f"({recorded[0]}-{recorded[-1]}), got {first_epochs}")
        earlier = earlier.up_to(first_epochs)
    if already_prepended(earlier, later):
        raise SystemExit(f"{checkpoint}'s timeline already starts with {earlier_folder}'s epochs")
    try:
        joined = concatenate(earlier, later)
    except ValueError as error:
        raise SystemExit(f"cannot put {earlier_folder}'s timeline before {checkpoint}'s: {error}") from error
    joined.save(checkpoint)
    return joined


def with_stages(timeline: Timeline, specs: list[list[str]]) -> Timeline:
    """The timeline with its stages replaced by `specs`, each [first epoch, name, label], checked against its epochs."""
    epochs = [e["epoch"] for e in timeline.epochs]
    stages = []
    for first, name, label in specs:
        try:
            first_epoch = int(first)
        except ValueError:
            raise ValueError(f"--stage's first epoch must be a whole number, got {first!r}") from None
        if first_epoch not in epochs:
            raise ValueError(f"--stage {first_epoch}: the timeline has no epoch {first_epoch} "
                             f"(its epochs are {epochs[0]}-{epochs[-1]})")
        if stages and first_epoch <= stages[-1]["first_epoch"]:
            raise ValueError(f"--stage {first_epoch} must start after the stage before it "
                             f"(epoch {stages[-1]['first_epoch']}); give the stages in order")
        if not name.strip() or not label.strip():
            raise ValueError(f"--stage {first_epoch} needs a name and a label that are not empty")
        stages.append({"first_epoch": first_epoch, "name": name.strip(), "label": label.strip()})
    if stages[0]["first_epoch"] != epochs[0]:
        raise ValueError(f"the first --stage must start at the timeline's first epoch, {epochs[0]}")
    return Timeline(timeline.sentences, timeline.epochs, timeline.maps, stages)


def main(argv=None) -> None:
    parser = CommandParser(prog="python -m transformer.training.timeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder whose metrics.json lists the epochs")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--epochs-dir", help="folder of epoch-NNN.safetensors written by --save-epochs")
    source.add_argument("--prepend", metavar="FOLDER",
                        help="a folder with the timeline of the stage the checkpoint was warm-started from")
    parser.add_argument("--prepend-epochs", type=number_type("--prepend-epochs", int), metavar="N",
                        help="with --prepend: only the earlier stage's first N epochs (default: all of them)")
    source.add_argument("--stage", nargs=3, action="append", metavar=("FIRST_EPOCH", "NAME", "LABEL"),
                        help="name the stage that starts at FIRST_EPOCH (repeat for each stage, in order); "
                             "replaces the stages the timeline had")
    args = parser.parse_args(argv)
    if args.prepend_epochs is not None and not args.prepend:
        parser.error("--prepend-epochs goes with --prepend")
    if args.stage:
        timeline = Timeline.load(args.checkpoint)
        if timeline is None or not timeline.epochs:
            parser.error(f"--checkpoint {args.checkpoint} has no {TIMELINE_JSON} and {TIMELINE_TENSORS} with epochs")
        try:
            timeline = with_stages(timeline, args.stage)
        except ValueError as error:
            parser.error(str(error))
        timeline.save(args.checkpoint)
        print(f"wrote {len(timeline.stages)} stage(s) into {Path(args.checkpoint) / TIMELINE_JSON}")
        return
    if args.prepend:
        joined = prepend(args.checkpoint, args.prepend, args.prepend_epochs)
        print(f"wrote {Path(args.checkpoint) / TIMELINE_JSON} and {TIMELINE_TENSORS} ({len(joined.epochs)} epochs)")
        return
    translator = Translator.from_pretrained(args.checkpoint)
    metrics = translator.metrics or {}
    reports = {r["epoch"]: r for r in metrics.get("epochs", [])}
    timeline = Timeline.for_language(translator.languages["src"],
                                     stage_label(metrics.get("training", {}).get("init_from")))
    final_state = {k: v.clone() for k, v in translator.model.state_dict().items()}
    for path in sorted(Path(args.epochs_dir).glob("epoch-*.safetensors")):
        epoch = int(path.stem.split("-")[1])
        if epoch not in reports:
            continue
        translator.model.load_state_dict(load_file(str(path)), strict=False)
        timeline.record(translator, epoch, reports[epoch]["train_loss"], reports[epoch]["val_bleu"])
        print(f"epoch {epoch}: {timeline.epochs[-1]['outputs'][0]['text']}", flush=True)
    translator.model.load_state_dict(final_state)
    timeline.save(args.checkpoint)
    print(f"wrote {Path(args.checkpoint) / TIMELINE_JSON} and {TIMELINE_TENSORS} ({len(timeline.epochs)} epochs)")


if __name__ == "__main__":
    main()
