"""One training folder from several corpora: `python -m transformer.data mix`.

    python -m transformer.data mix --out data/mixed ../shared/data/tatoeba ../shared/data/multi30k --repeat 1 2

writes, for each language of the pair:
  train.LANG  every corpus's training split, each repeated `--repeat` times (a smaller corpus is sampled more
              often that way, with no randomness to record);
  val.LANG    every corpus's val split once, one after the other, so a model is selected on all of them;
  mix.json    the recipe (folders, repeats, line counts) and where each corpus's val lines sit, so training
              reports val BLEU per corpus and the end of a run scores each corpus's test splits in its own folder.
Test splits are not copied: they stay in their corpus's folder and are reported per corpus.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..paths import portable_path
from .parallel import CorpusError, read_parallel

MIX_FILE = "mix.json"
MIXED_SPLITS = ("train", "val")
# what each known corpus is, with the license and credit its README asks every model card to carry
CORPUS_CREDITS = {
    "tatoeba": "Tatoeba English–German, everyday sentences (CC-BY 2.0, https://creativecommons.org/licenses/by/2.0/, "
               "under the Tatoeba terms of use; from the Tatoeba Project, tatoeba.org, as packaged by "
               "www.manythings.org/anki)",
    "multi30k": "Multi30k task 1, image captions (Elliott, Frank, Sima'an and Specia, 2016, \"Multi30K: Multilingual "
                "English-German Image Descriptions\")",
}


@dataclass
class MixPart:
    """One corpus of a mix: `val` is its [first, last) line range in the mixed val split."""

    name: str
    folder: str
    repeat: int
    val: tuple[int, int]
    tests: list[str]


def corpus_name(folder: Path) -> str:
    return folder.resolve().name


def test_splits(folder: Path, language: str) -> list[str]:
    """The splits of `folder` besides train and val that exist for `language`: its test sets."""
    return sorted(p.stem for p in folder.glob(f"*.{language}") if p.is_file() and p.stem not in MIXED_SPLITS)


def mix(folders: list, repeats: list[int], out, languages: tuple[str, str]) -> dict:
    """Writes the mixed train and val splits and mix.json into `out`; returns the recipe. Every corpus is read
    (and checked) before anything is written, so a bad one leaves `out` untouched."""
    folders = [Path(f) for f in folders]
    if len(repeats) != len(folders):
        raise CorpusError(f"--repeat gives {len(repeats)} counts for {len(folders)} folders: give one per folder")
    names = [corpus_name(f) for f in folders]
    if len(set(names)) != len(names):
        raise CorpusError(f"two folders share a name ({', '.join(names)}): the per-corpus scores need distinct names")
    corpora = {split: [read_parallel(f, split, *languages) for f in folders] for split in MIXED_SPLITS}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for index, language in enumerate(languages):
        for split, parts in corpora.items():
            lines = [line for part, repeat in zip(parts, repeats if split == "train" else [1] * len(parts))
                     for _ in range(repeat) for line in (part.source if index == 0 else part.target)]
            (out / f"{split}.{language}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    recipe, start = {"languages": list(languages), "corpora": []}, 0
    for folder, name, repeat, train, val in zip(folders, names, repeats, corpora["train"], corpora["val"]):
        recipe["corpora"].append({"name": name, "folder": str(folder), "repeat": repeat, "train_lines": len(train),
                                  "val": [start, start + len(val)], "tests": test_splits(folder, languages[0])})
        start += len(val)
    (out / MIX_FILE).write_text(json.dumps(recipe, indent=2) + "\n")
    return recipe


def mix_parts(data_dir) -> list[MixPart]:
    """The corpora a mixed folder was made from, or [] for a plain corpus folder."""
    path = Path(data_dir) / MIX_FILE
    if not path.is_file():
        return []
    recipe = json.loads(path.read_text())
    return [MixPart(c["name"], c["folder"], c["repeat"], tuple(c["val"]), c["tests"]) for c in recipe["corpora"]]


def mix_record(data_dir) -> dict:
    """What metrics.json records of a mixed training folder (nothing for a plain one), its folders portable."""
    path = Path(data_dir) / MIX_FILE
    if not path.is_file():
        return {}
    recipe = json.loads(path.read_text())
    for corpus in recipe["corpora"]:
        corpus["folder"] = portable_path(corpus["folder"])
    return {"mix": recipe}


def corpora_described(data: dict) -> str:
    """The corpora a model learned from, with their licenses and credits, from metrics.json's `data`."""
    if "mix" in data:
        corpora = [(c["name"], c["train_lines"], c["repeat"]) for c in data["mix"]["corpora"]]
    else:
        corpora = [(Path(data["train"]["files"][0]).parent.name, data["train"]["lines"], 1)]
    described = [f"{CORPUS_CREDITS.get(name.lower(), name)}: {lines:,} training pairs"
                 f"{f', repeated {repeat}×' if repeat > 1 else ''}" for name, lines, repeat in corpora]
    return "; ".join(described)


def score_name(metrics: dict | None, data_dir, split: str) -> str:
    """The name a split's score takes in metrics.json: CORPUS/SPLIT for a corpus the model's training mix
    came from (as the end of training names them), else the split alone."""
    names = {c["name"] for c in ((metrics or {}).get("data", {}).get("mix") or {}).get("corpora", [])}
    name = corpus_name(Path(data_dir))
    return f"{name}/{split}" if name in names else split


def score_source(metrics: dict | None, named: str) -> tuple[str | None, str]:
    """(folder or None, split) of a score named by `score_name`: where to read it again."""
    folders = {c["name"]: c["folder"] for c in ((metrics or {}).get("data", {}).get("mix") or {}).get("corpora", [])}
    corpus, _, split = named.rpartition("/")
    return (folders[corpus], split) if corpus in folders else (None, named)
