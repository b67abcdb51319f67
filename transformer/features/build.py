"""A dictionary for one recording point of a checkpoint, from a corpus to its folder, measured:

    1. gather the point's vectors over the first `sentences` pairs of CORPUS/train (gather.py);
    2. train the TopK autoencoder on them (training.py);
    3. measure it on `held_out` later pairs of train, which it never saw: unexplained variance, dead latents,
       active latents per token (metrics.py);
    4. decode CORPUS/val greedily with the point replaced by its reconstruction, against the model's own greedy
       translations: the share of identical translations and the BLEU change against the references;
    5. save the dictionary and its config with those metrics (files.py).

Each stage reports through `progress(stage, done, total)`, `done` counted from the stage's start; the CLI draws it
as bars.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..core.patching import patch
from ..corpus.parallel import CorpusError, read_parallel
from ..corpus.scoring import score, translate_corpus
from ..decoding.translator import Translator
from .dictionary import DictionaryConfig, DictionaryError, SparseDictionary, checked_setting
from .files import Origin, save_dictionary
from .gather import gather_activations, point_path
from .metrics import measure
from .training import Trainer, TrainingSettings


@dataclass(frozen=True)
class BuildSettings:
    point: str  # the recording point, e.g. "encoder_layers.3.output"
    n: int = 4096  # latents
    k: int = 32  # active per token
    sentences: int = 30_000  # training pairs: the first of CORPUS/train
    held_out: int = 10_000  # the pairs after them, for the metrics (about 100,000 tokens)
    val_sentences: int | None = None  # CORPUS/val pairs decoded with the point replaced (None: all)
    epochs: int = 3
    batch_size: int = 1024
    learning_rate: float = 1e-3
    seed: int = 0


def read_pairs(corpus_dir, split: str, languages: dict) -> tuple[list[str], list[str]]:
    try:
        corpus = read_parallel(Path(corpus_dir), split, languages["src"], languages["tgt"])
    except CorpusError as error:
        raise DictionaryError(str(error)) from None
    return corpus.source, corpus.target


def replaced(model, path: str, dictionary: SparseDictionary):
    """A patch that puts each vector's reconstruction in its place at `path`."""
    return patch(model, {path: lambda x: dictionary(x).reconstruction.to(x.dtype)})


def fidelity(translator: Translator, path: str, dictionary: SparseDictionary, sources, references,
             progress: Callable | None = None) -> dict:
    """Greedy translations of `sources` as the model makes them and with `path` replaced by its reconstruction:
    the share that are identical, and each one's BLEU against `references`."""
    done = [0]

    def step(batch: int):  # translate_corpus tells each batch's size; the stage counts both passes
        done[0] += batch
        if progress:
            progress("val", done[0], 2 * len(sources))

    plain = translate_corpus(translator, sources, "greedy", progress=step)
    with torch.inference_mode(), replaced(translator.model, path, dictionary):
        rebuilt = translate_corpus(translator, sources, "greedy", progress=step)
    same = sum(a == b for a, b in zip(plain, rebuilt))
    bleu_plain, bleu_rebuilt = score(plain, references)["bleu"], score(rebuilt, references)["bleu"]
    return {"val_sentences": len(sources), "greedy_identical": round(same / len(sources), 4),
            "bleu": round(bleu_plain, 2), "bleu_replaced": round(bleu_rebuilt, 2),
            "bleu_change": round(bleu_rebuilt - bleu_plain, 2)}


def build_dictionary(checkpoint, corpus_dir, out, settings: BuildSettings, progress: Callable | None = None,
                     corpus_name: str | None = None) -> dict:
    """Steps 1-5 above; returns the metrics written to OUT/config.json."""
    began = time.monotonic()
    report = progress or (lambda stage, done, total: None)
    translator = Translator.from_pretrained(checkpoint)
    languages = translator.languages
    path = point_path(translator.model, settings.point)
    sources, targets = read_pairs(corpus_dir, "train", languages)
    val_sources, val_targets = read_pairs(corpus_dir, "val", languages)  # read now: a missing val ends no training
    checked_setting("sentences", settings.sentences, int, 1, len(sources) - 1)
    checked_setting("held_out", settings.held_out, int, 1, len(sources) - settings.sentences)
    if settings.val_sentences is not None:
        checked_setting("val_sentences", settings.val_sentences, int, 1, len(val_sources))
    # every setting checked before the work starts: the dictionary's shape and the training's
    DictionaryConfig(d_model=translator.model.config.d_model, n=settings.n, k=settings.k, seed=settings.seed)
    training = TrainingSettings(epochs=settings.epochs, batch_size=settings.batch_size,
                                learning_rate=settings.learning_rate)
    train = slice(0, settings.sentences)
    held = slice(settings.sentences, settings.sentences + settings.held_out)

    def gathered(part: slice, stage: str):
        return gather_activations(translator, path, sources[part], targets[part], batch_size=64,
                                  progress=lambda done, total: report(stage, done, total)).vectors

    vectors = gathered(train, "gathering")
    config = DictionaryConfig(d_model=vectors.shape[1], n=settings.n, k=settings.k, seed=settings.seed)
    trainer = Trainer(vectors, config, training)
    dictionary = trainer.train(progress=lambda p: report("training", (p.epoch - 1) * p.steps + p.step,
                                                         p.epochs * p.steps))
    dictionary.eval()
    metrics = measure(dictionary, gathered(held, "held out")).to_dict()
    count = len(val_sources) if settings.val_sentences is None else settings.val_sentences
    metrics |= fidelity(translator, path, dictionary, val_sources[:count], val_targets[:count], report)
    metrics["seconds"] = round(time.monotonic() - began, 1)
    origin = Origin(point=path, model=Path(checkpoint).name, corpus=corpus_name or Path(corpus_dir).name,
                    sentences=settings.sentences)
    save_dictionary(out, dictionary, origin, metrics)
    return metrics
