"""Sequence-level knowledge distillation (Kim & Rush, 2016), the teacher's half: a trained teacher translates
every training source of a corpus mix, and its translations become the targets a smaller student learns from.

    python -m transformer.distill translate --teacher runs/teacher-en-de --mix runs/mix --out distilled/en-de

For each corpus of the mix (its mix.json names them) the teacher translates that corpus's own train.SRC (once, not
as often as the mix repeats it) into OUT/CORPUS.train.TGT.gz, line N translating line N. It works in chunks,
always on the corpus least far along, so a run stopped by its time budget (or killed) has covered the same share
of every corpus; each chunk is appended to disk as it ends (distill_shards.py), and a second run continues where
the first stopped. OUT/teacher.json records the teacher (its scores, command, hardware, minutes) and how far the
translation got; `python -m transformer.distill student` (distill_student.py) turns OUT into a training folder.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from ..command_line import write_json_atomically
from ..corpus.mix import MIX_FILE
from ..corpus.parallel import CorpusError, read_lines
from ..decoding.batch_beam import beam_search_ids
from ..decoding.translator import Translator
from ..json_files import read_json
from ..paths import portable_path
from .distill_shards import LineShard
from .finalize import hardware

RECORD_FILE = "teacher.json"
TEACHER_KEYS = ("epochs_run", "updates", "wall_minutes", "stopped_by_time_budget", "hardware", "torch", "command",
                "max_tokens", "lr", "warmup")


def shard_name(corpus: str, language: str) -> str:
    return f"{corpus}.train.{language}.gz"


def file_digest(path) -> str:
    """sha256 of a file: the student checks that it pairs the distilled targets with the very sources translated."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass
class CorpusJob:
    """One corpus of the mix to translate: its training sources and the shard its translations go to."""

    name: str
    source_file: Path
    sources: list[str]
    shard: LineShard

    @property
    def share_done(self) -> float:
        return self.shard.lines / len(self.sources)


def mix_jobs(mix_dir, out, src: str, tgt: str) -> list[CorpusJob]:
    """Every corpus of the mixed folder `mix_dir`, with its sources read and its shard opened (resumed)."""
    recipe_file = Path(mix_dir) / MIX_FILE
    if not recipe_file.is_file():
        raise CorpusError(f"{recipe_file}: missing; make the mix with python -m transformer.data mix")
    jobs = []
    for corpus in read_json(recipe_file, CorpusError)["corpora"]:
        source_file = Path(corpus["folder"]) / f"train.{src}"
        sources = read_lines(source_file)
        shard = LineShard(Path(out) / shard_name(corpus["name"], tgt))
        if shard.lines > len(sources):
            raise CorpusError(f"{shard.path} holds {shard.lines:,} lines but {source_file} only {len(sources):,}: "
                              "it was made from other sources; delete it or choose another --out")
        jobs.append(CorpusJob(corpus["name"], source_file, sources, shard))
    return jobs


def teacher_record(teacher: Translator, folder) -> dict:
    """What the student's model card says of the teacher: its shape, how it was trained, its beam scores."""
    metrics = teacher.metrics or {}
    training = metrics.get("training", {})
    return {"checkpoint": portable_path(folder), "parameters": metrics.get("parameters"),
            "model": metrics.get("model"), "training": {key: training.get(key) for key in TEACHER_KEYS},
            "decoding": metrics.get("decoding"), "scores": metrics.get("scores", {})}


def translate_all(teacher: Translator, sentences: list[str], beam_size: int, length_penalty: float,
                  batch_size: int) -> list[str]:
    """Beam translations of `sentences` in input order, decoded in batches of similar length (less padding) by the
    search that keeps only the winners (decoding/batch_beam.py: the beam strategy's choices, none of its trace)."""
    sources = [teacher.source_ids(sentence)[0] for sentence in sentences]
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs = [""] * len(sources)
    for start in range(0, len(order), batch_size):
        batch = order[start: start + batch_size]
        found = beam_search_ids(teacher.model, [sources[i] for i in batch], beam_size, length_penalty)
        for index, ids in zip(batch, found):
            outputs[index] = teacher.tokenizer.decode(ids)
    return outputs


def distill(teacher: Translator, jobs: list[CorpusJob], record: dict, out, beam_size: int = 4,
            length_penalty: float = 0.6, batch_size: int = 64, chunk: int = 2048, deadline: float = float("inf"),
            progress=None) -> dict:
    """Translates the jobs' remaining sources chunk by chunk until all are done or `time.time()` passes `deadline`
    (checked between chunks), rewriting OUT/teacher.json after each; returns the final record. progress(job,
    lines) is called after each chunk."""
    started = time.perf_counter()
    earlier = record.get("translation", {}).get("seconds", 0.0)

    def save(complete: bool) -> None:
        record["translation"] = {
            "strategy": "beam", "beam_size": beam_size, "length_penalty": length_penalty, "complete": complete,
            "seconds": round(earlier + time.perf_counter() - started, 1),
            "hardware": hardware(teacher.model.device), "corpora": {
                job.name: {"source": portable_path(job.source_file), "source_sha256": file_digest(job.source_file),
                           "source_lines": len(job.sources), "translated": job.shard.lines,
                           "file": job.shard.path.name} for job in jobs}}
        write_json_atomically(Path(out) / RECORD_FILE, record)

    save(all(job.share_done >= 1 for job in jobs))
    while True:
        waiting = [job for job in jobs if job.share_done < 1]
        if not waiting or time.time() > deadline:
            break
        job = min(waiting, key=lambda j: j.share_done)  # the corpus least far along, so a cut covers all alike
        sources = job.sources[job.shard.lines: job.shard.lines + chunk]
        job.shard.append(translate_all(teacher, sources, beam_size, length_penalty, batch_size))
        save(False)
        if progress is not None:
            progress(job, len(sources))
    save(all(job.share_done >= 1 for job in jobs))
    return record
