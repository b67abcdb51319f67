"""`python -m transformer.distill`: sequence-level knowledge distillation in two commands.

    python -m transformer.distill translate --teacher runs/teacher-en-de --mix runs/mix --out distilled/en-de \\
        --device cuda --batch-size 256 --max-minutes 3
    python -m transformer.distill student --distilled distilled/en-de --corpora ../shared/data --out data/kd-en-de
    python -m transformer.train --init-from checkpoints/en-de --data-dir data/kd-en-de --src en --tgt de ...

`translate` (distill.py) has a teacher translate every training source of a corpus mix into compressed files,
resumably; `student` (distill_student.py) makes the training folder a student learns from. scripts/distill_gpu.sh
trains both teachers and runs `translate` for both directions in one GPU window; docs/training.md has the recipe.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ..checkpoint import CheckpointError
from ..command_line import CommandParser, add_threads, answered, command_text, device_type, number_type
from ..corpus.mix import MIX_FILE
from ..corpus.parallel import CorpusError
from ..decoding.strategies import SettingError
from ..decoding.translator import Translator
from ..json_files import read_json
from ..path_checks import output_folder_problem
from .distill import RECORD_FILE, distill, mix_jobs, teacher_record
from .distill_shards import ShardError
from .distill_student import build_student_folder


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="python -m transformer.distill", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    translate = commands.add_parser("translate", help="a teacher translates every training source of a mix")
    translate.add_argument("--teacher", required=True, help="the teacher's checkpoint folder (decides the pair)")
    translate.add_argument("--mix", required=True, help="the mixed training folder the teacher was trained on "
                                                        "(its mix.json names the corpora to translate)")
    translate.add_argument("--out", required=True, help="folder for CORPUS.train.TGT.gz and teacher.json; a folder "
                                                        "an earlier run left is continued")
    translate.add_argument("--device", type=device_type, default="cpu", help="cpu or cuda (default: cpu)")
    translate.add_argument("--beam-size", type=number_type("--beam-size", int, 1, 8), default=4,
                           help="beam width, 1 to 8 (default: 4)")
    translate.add_argument("--length-penalty", type=number_type("--length-penalty", float, 0.0, 2.0), default=None,
                           help="GNMT length penalty, 0 to 2 (default: the teacher's recorded one, else 0.6)")
    translate.add_argument("--batch-size", type=number_type("--batch-size", int, 1, 4096), default=64,
                           help="sentences per batch, 1 to 4096 (default: 64; 256 suits a GPU)")
    translate.add_argument("--chunk", type=number_type("--chunk", int, 1, 10**6), default=2048,
                           help="sentences translated between two writes to disk, 1 to 1,000,000 (default: 2048)")
    translate.add_argument("--max-minutes", type=number_type("--max-minutes", float, 0.0), default=None,
                           help="stop after the chunk that ends past this many minutes (run again to go on)")
    add_threads(translate)
    student = commands.add_parser("student", help="the training folder a student learns from")
    student.add_argument("--distilled", required=True, help="a folder `translate` wrote (one direction)")
    student.add_argument("--corpora", default="../shared/data",
                         help="the folder holding each corpus of the mix by name (default: ../shared/data)")
    student.add_argument("--out", required=True, help="the training folder to write")
    student.add_argument("--with-references", action="store_true",
                         help="add the original pairs to the teacher's (default: the teacher's translations only)")
    return parser


def run_translate(parser: argparse.ArgumentParser, args: argparse.Namespace, argv) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    deadline = time.time() + args.max_minutes * 60 if args.max_minutes is not None else float("inf")
    if not (Path(args.mix) / MIX_FILE).is_file():
        parser.error(f"--mix {args.mix}: no {MIX_FILE} there; make the mix with python -m transformer.data mix")
    with answered(parser, CheckpointError, CorpusError, SettingError, ShardError, FileNotFoundError):
        teacher = Translator.from_pretrained(args.teacher, device=args.device)
        src, tgt = teacher.languages["src"], teacher.languages["tgt"]
        _, recorded = teacher.recorded_decoding("beam")
        length_penalty = args.length_penalty if args.length_penalty is not None else recorded["length_penalty"]
        jobs = mix_jobs(args.mix, args.out, src, tgt)
        recipe = read_json(Path(args.mix) / MIX_FILE, CorpusError)
        earlier = Path(args.out) / RECORD_FILE
        record = read_json(earlier, CorpusError) if earlier.exists() else {}
        made_by = teacher_record(teacher, args.teacher)
        if any(job.shard.lines for job in jobs) and not same_teacher(record.get("teacher"), made_by):
            parser.error(f"--out {args.out} holds translations by another teacher than {args.teacher} (its "
                         f"{RECORD_FILE} says so): choose a new --out, or delete that folder")
        record.update({"languages": {"src": src, "tgt": tgt},
                       "mix": {"corpora": [{"name": c["name"], "repeat": c["repeat"]} for c in recipe["corpora"]]},
                       "teacher": made_by,
                       "made_by": command_text("transformer.distill", argv)})
        total = sum(len(job.sources) for job in jobs)
        started, pair = time.perf_counter(), f"{src}-{tgt}"
        print(f"{pair}: {total - sum(job.shard.lines for job in jobs):,} of {total:,} training sources to translate "
              f"(beam {args.beam_size}, length penalty {length_penalty}, batches of {args.batch_size})", flush=True)
        counted = [0]

        def progress(job, lines: int) -> None:
            counted[0] += lines
            seconds = time.perf_counter() - started
            print(f"{pair}: {job.name} {job.shard.lines:,}/{len(job.sources):,} ({100 * job.share_done:.0f}%), "
                  f"{counted[0] / seconds:,.0f} sentences/s, {seconds / 60:.1f} min", flush=True)

        record = distill(teacher, jobs, record, args.out, args.beam_size, length_penalty, args.batch_size,
                         args.chunk, deadline, progress)
    done = record["translation"]
    state = "all translated" if done["complete"] else "stopped by its time budget: run it again to go on"
    print(f"{pair}: {state}; wrote {args.out} ({done['seconds'] / 60:.1f} min of translation)", flush=True)


def same_teacher(recorded: dict | None, teacher: dict) -> bool:
    """Whether a folder's recorded teacher is this one: the same shape, training and scores (wherever it lies)."""
    return recorded is not None and all(recorded.get(key) == teacher.get(key)
                                        for key in ("parameters", "model", "training", "scores"))


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    out_problem = output_folder_problem(args.out)  # both commands write into --out: checked before any work
    if out_problem:
        parser.error(f"--out {args.out} {out_problem}")
    if args.command == "translate":
        run_translate(parser, args, argv)
        return
    with answered(parser, CorpusError):
        record = build_student_folder(args.distilled, args.corpora, args.out, args.with_references)
    print(f"{json.dumps(record['train_lines'])}\nwrote {args.out}")
