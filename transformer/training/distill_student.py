"""Sequence-level knowledge distillation, the student's half: a training folder whose targets are a teacher's
translations, for `python -m transformer.train --init-from checkpoints/en-de --data-dir FOLDER`.

    python -m transformer.distill student --distilled distilled/en-de --corpora ../shared/data --out data/kd-en-de
    python -m transformer.distill student ... --with-references      # the original pairs as well

The folder is a corpus mix (mix.json, corpus/mix.py) of the same corpora, repeated as the teacher's mix repeated
them: each corpus's training sources paired with the teacher's translations (only the lines it translated, should
its run have been cut short), and with --with-references its original pairs too. The val split is the corpora's
own, human references, so the student is selected on what it is scored on; the test splits stay in their folders
and are reported per corpus. distilled.json records the teacher and the recipe, and `train` copies it into the
student's metrics.json (`data.distilled`) for its model card.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..command_line import write_json_atomically
from ..corpus.mix import MIX_FILE, test_splits
from ..corpus.parallel import CorpusError, read_lines, read_parallel
from ..json_files import read_json
from ..paths import portable_path
from .distill import RECORD_FILE, file_digest
from .distill_shards import read_lines as read_shard
from .finalize import DISTILLED_FILE


def read_record(distilled_dir) -> dict:
    path = Path(distilled_dir) / RECORD_FILE
    if not path.is_file():
        raise CorpusError(f"{path}: missing; --distilled takes the folder `python -m transformer.distill translate` "
                          "(or scripts/distill_gpu.sh) wrote")
    record = read_json(path, CorpusError)
    missing = [key for key in ("languages", "mix", "teacher", "translation") if key not in record]
    if missing:
        raise CorpusError(f"{path}: has no {', '.join(missing)}; remake the folder with python -m transformer.distill "
                          "translate")
    return record


def distilled_pairs(distilled_dir, record: dict, corpus: str, folder: Path) -> tuple[list[str], list[str]]:
    """The corpus's training sources that the teacher translated, with its translations; checks that the sources
    are the very file it translated."""
    src = record["languages"]["src"]
    made = record["translation"]["corpora"][corpus]
    source_file = folder / f"train.{src}"
    sources = read_lines(source_file)
    if file_digest(source_file) != made["source_sha256"]:
        raise CorpusError(f"{source_file} is not the file the teacher translated ({made['source']}, "
                          f"{made['source_lines']:,} lines): give --corpora the folder that holds that corpus")
    targets = read_shard(Path(distilled_dir) / made["file"])
    return sources[: len(targets)], targets


def build_student_folder(distilled_dir, corpora_dir, out, with_references: bool = False) -> dict:
    """Writes the student's training folder into `out` (train and val of both languages, mix.json, distilled.json);
    returns distilled.json's record. Everything is read and checked before anything is written."""
    record = read_record(distilled_dir)
    src, tgt = record["languages"]["src"], record["languages"]["tgt"]
    parts, counts = [], {}
    for corpus in record["mix"]["corpora"]:
        folder = Path(corpora_dir) / corpus["name"]
        sources, targets = distilled_pairs(distilled_dir, record, corpus["name"], folder)
        counts[corpus["name"]] = {"distilled": len(sources), "repeat": corpus["repeat"]}
        if with_references:
            original = read_parallel(folder, "train", src, tgt)
            sources, targets = sources + original.source, targets + original.target
        parts.append((corpus, folder, sources, targets, read_parallel(folder, "val", src, tgt)))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    train = [(s, t) for corpus, _, sources, targets, _ in parts for _ in range(corpus["repeat"])
             for s, t in zip(sources, targets)]
    val = [(s, t) for *_, corpus_val in parts for s, t in zip(corpus_val.source, corpus_val.target)]
    for split, pairs in (("train", train), ("val", val)):
        for index, language in enumerate((src, tgt)):
            (out / f"{split}.{language}").write_text("".join(pair[index] + "\n" for pair in pairs), encoding="utf-8")
    recipe, start = {"languages": [src, tgt], "corpora": []}, 0
    for corpus, folder, sources, _, corpus_val in parts:
        recipe["corpora"].append({"name": corpus["name"], "folder": str(folder), "repeat": corpus["repeat"],
                                  "train_lines": len(sources), "val": [start, start + len(corpus_val)],
                                  "tests": test_splits(folder, src)})
        start += len(corpus_val)
    (out / MIX_FILE).write_text(json.dumps(recipe, indent=2) + "\n")
    provenance = {
        "method": "sequence-level knowledge distillation (Kim & Rush, 2016): the teacher's beam translations of the "
                  "training sources as targets" + (", with the original pairs as well" if with_references else ""),
        "from": portable_path(distilled_dir), "with_references": with_references,
        "student_command": shlex.join(["python", "-m", "transformer.distill", "student", "--distilled",
                                       portable_path(distilled_dir), "--corpora", portable_path(corpora_dir), "--out",
                                       portable_path(out)] + (["--with-references"] if with_references else [])),
        "teacher": record["teacher"], "made_by": record.get("made_by"),
        "translation": {key: value for key, value in record["translation"].items() if key != "corpora"},
        "train_lines": {"by_corpus": counts, "total": len(train)},
    }
    write_json_atomically(out / DISTILLED_FILE, provenance)
    return provenance
