"""python -m transformer.features train | top | steer | explain (also `attention-explorer-features`).

    python -m transformer.features train en-de ../shared/data/tatoeba dictionaries/en-de-enc3 \\
        --point encoder_layers.3.output --n 4096 --k 32
    python -m transformer.features top dictionaries/en-de-enc3 --build          # its catalogue: the atlas's pairs
    python -m transformer.features top dictionaries/en-de-enc3 --latent 412     # contexts, histogram, label
    python -m transformer.features top dictionaries/en-de-enc3 --piece dog      # the latents that fire on it
    python -m transformer.features steer dictionaries/en-de-enc3 --sentence "A dog runs." --latent 412 --scale 0
    python -m transformer.features explain dictionaries/en-de-enc3 --sentence "A dog runs." --piece 2

`top`, `steer` and `explain` print JSON. Latents count from 0 (they are a dictionary's columns); positions and pieces
count from 1, like the API's. A bad setting, checkpoint, corpus or dictionary ends the program with one line naming
it (exit status 2), and nothing is written; so does a `top --piece` that finds no latent (a piece of the other
language: an encoder point reads the source's pieces, a decoder point the target's).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..checkpoint import CheckpointError
from ..command_line import CommandParser, answered, check_writable, number_type, sentence_type
from ..core.head_ref import from_shown
from ..decoding.translator import Translator
from ..path_checks import not_a_folder, output_folder_problem
from . import build as building
from .build import BuildSettings, build_dictionary, read_pairs
from .catalogue import CATALOGUE_FILE, atlas_pairs, build_catalogue, load_catalogue, save_catalogue
from .dictionary import DictionaryError
from .files import load_dictionary
from .reading import describe, piece_latents
from .steering import Edit, explanation, steer

PROG = "python -m transformer.features"


def parser() -> CommandParser:
    top = CommandParser(prog=PROG, description=__doc__)
    commands = top.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    train = commands.add_parser("train", help="train a dictionary for one recording point of a checkpoint",
                                description=building.__doc__)
    train.add_argument("checkpoint", help="checkpoint folder, or a shipped one by name (en-de, de-en)")
    train.add_argument("corpus_dir", help="folder holding train.<src>, train.<tgt>, val.<src> and val.<tgt>")
    train.add_argument("out", help="the dictionary's folder, which must not exist (or be empty)")
    train.add_argument("--point", required=True, help="the recording point, e.g. encoder_layers.3.output")
    defaults = BuildSettings(point="")
    for flag, kind, low, high, what in [
        ("--n", int, 1, 1 << 20, "latents"), ("--k", int, 1, 1024, "latents active per token"),
        ("--sentences", int, 1, None, "training pairs, the first of train"),
        ("--held-out", int, 1, None, "the pairs after them, for the metrics"),
        ("--val-sentences", int, 1, None, "val pairs decoded with the point replaced (default: all)"),
        ("--epochs", int, 1, 1000, "passes over the training tokens"),
        ("--batch-size", int, 1, 1 << 16, "tokens per Adam step"),
        ("--learning-rate", float, 1e-7, 1.0, "Adam's"), ("--seed", int, 0, 2**31 - 1, "initial directions, order"),
    ]:
        name = flag[2:].replace("-", "_")
        train.add_argument(flag, type=number_type(flag, kind, low, high), default=getattr(defaults, name),
                           help=f"{what} (default: {getattr(defaults, name)})")
    train.add_argument("--threads", type=number_type("--threads", int, 1, 1024), default=None,
                       help="torch CPU threads (default: torch's choice); one thread makes a run reproducible")
    for name, text in [("top", "what a latent is (its strongest contexts, histogram and label), the latents of a "
                                "piece, or --build: the catalogue they are read from, beside the dictionary"),
                       ("steer", "translate a sentence with one latent removed or scaled"),
                       ("explain", "the latents whose removal most lowers one piece of a translation")]:
        command = commands.add_parser(name, help=text, description=text + "; prints JSON")
        command.add_argument("dictionary", help="a dictionary folder made by `train`")
        command.add_argument("--checkpoint", default=None,
                             help="the dictionary's checkpoint (default: the shipped one its config.json names)")
        if name != "top":
            command.add_argument("--sentence", type=sentence_type("--sentence"), required=True,
                                 help="a sentence in the checkpoint's source language")
    top_command, steer_command, explain = (commands.choices[name] for name in ("top", "steer", "explain"))
    top_arguments(top_command)
    steer_command.add_argument("--latent", type=number_type("--latent", int, 0), required=True,
                               help="the latent, from 0")
    steer_command.add_argument("--scale", type=number_type("--scale", float, -100.0, 100.0), default=0.0,
                               help="its new multiple: 0 removes it (default), 2 doubles it")
    steer_command.add_argument("--positions", type=position_list, default=None,
                               help="positions at the point, from 1, comma-separated (default: all)")
    explain.add_argument("--target", type=sentence_type("--target"), default=None,
                         help="the translation to explain (default: the model's greedy translation)")
    explain.add_argument("--piece", type=number_type("--piece", int, 1), required=True,
                         help="which piece of the target, from 1 (its </s> last)")
    explain.add_argument("--exact", type=number_type("--exact", int, 0, 1000), default=10,
                         help="how many of the best estimated are measured exactly (default: 10)")
    return top


def top_arguments(command) -> None:
    wanted = command.add_mutually_exclusive_group(required=True)
    wanted.add_argument("--latent", type=number_type("--latent", int, 0), help="the latent, from 0")
    wanted.add_argument("--piece", type=sentence_type("--piece"),
                        help="a word or piece of the side the point reads (e.g. dog or ▁dog at an en-de encoder "
                             "point, Hund at a decoder point): the latents whose contexts are on it")
    wanted.add_argument("--build", action="store_true",
                        help="gather the corpus and write catalogue.npz into the dictionary's folder")
    command.add_argument("--contexts", type=number_type("--contexts", int, 1, 100), default=8,
                         help="contexts shown (default: 8)")
    command.add_argument("--corpus", default=None, help="with --build: a folder holding train.<src> and "
                         "train.<tgt> (default: the pairs the checkpoint's atlas indexes)")
    command.add_argument("--sentences", type=number_type("--sentences", int, 1), default=None,
                         help="with --build: the first this many pairs (default: all of the atlas's, or 1400)")


def position_list(text: str) -> tuple[int, ...]:
    """--positions: "2" or "2,5", numbered from 1 -> 0-based."""
    convert = number_type("--positions", int, 1)
    return tuple(from_shown(convert(part)) for part in text.split(","))


def train(args) -> None:
    problem = output_folder_problem(args.out)
    if problem is None and Path(args.out).is_dir() and any(Path(args.out).iterdir()):
        problem = "is not empty: choose a new folder, or remove this one (nothing is overwritten)"
    if problem:
        raise DictionaryError(f"{args.out}: {problem}")
    if not Path(args.corpus_dir).is_dir():
        raise DictionaryError(f"{args.corpus_dir}: {not_a_folder(args.corpus_dir)}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    settings = BuildSettings(args.point, args.n, args.k, args.sentences, args.held_out, args.val_sentences,
                             args.epochs, args.batch_size, args.learning_rate, args.seed)
    bars = Bars()
    try:
        metrics = build_dictionary(args.checkpoint, args.corpus_dir, args.out, settings, bars)
    finally:
        bars.close()
    print(json.dumps({"wrote": str(args.out), **metrics}, indent=1))


class Bars:
    """One tqdm bar per stage, opened when the stage starts; `done` is counted from the stage's start."""

    def __init__(self):
        from tqdm import tqdm

        self.tqdm, self.bars = tqdm, {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.bars:
            self.close()
            self.bars[stage] = self.tqdm(total=total, desc=stage, file=sys.stderr)
        bar = self.bars[stage]
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def opened(args):
    saved = load_dictionary(args.dictionary)
    return saved, Translator.from_pretrained(args.checkpoint or saved.origin.model)


def main(argv=None) -> None:
    top = parser()
    args = top.parse_args(argv)
    with answered(top, CheckpointError, DictionaryError):
        if args.command == "train":
            return train(args)
        if args.command == "top":
            check_top(args)
        saved, translator = opened(args)
        if args.command == "top":
            answer = top_of(args, saved, translator)
        elif args.command == "steer":
            result = steer(translator, saved, args.sentence, [Edit(args.latent, args.scale, args.positions)],
                           strategy="greedy")
            answer = {"sentence": args.sentence, "point": saved.origin.point, "latent": args.latent,
                      "scale": args.scale, "before": result.before, "after": result.after}
        else:
            answer = explained(args, saved, translator)
        print(json.dumps(answer, ensure_ascii=False, indent=1))


def check_top(args) -> None:
    """`top`'s flags and paths, before anything is loaded or gathered: --build's catalogue can be written beside the
    dictionary, and its --corpus is a folder."""
    if not args.build and (args.corpus or args.sentences):
        raise DictionaryError("--corpus and --sentences go with --build (they choose the catalogue's corpus)")
    if args.build:
        check_writable(Path(args.dictionary) / CATALOGUE_FILE)
    if args.corpus and not Path(args.corpus).is_dir():
        raise DictionaryError(f"--corpus {args.corpus} {not_a_folder(args.corpus)}")


def top_of(args, saved, translator) -> dict:
    """`top`: the catalogue built (--build), one latent described, or the latents of a piece."""
    if args.build:
        if args.corpus:
            sources, targets = read_pairs(args.corpus, "train", translator.languages)
            corpus = f"{Path(args.corpus).name}/train"
            sources, targets = sources[: args.sentences or 1400], targets[: args.sentences or 1400]
        else:
            sources, targets, corpus = atlas_pairs(translator.source)
            sources, targets = sources[: args.sentences], targets[: args.sentences]
        bars = Bars()
        try:
            catalogue = build_catalogue(translator, saved, sources, targets, corpus,
                                        progress=lambda done, total: bars("gathering", done, total))
        finally:
            bars.close()
        path = save_catalogue(args.dictionary, catalogue)
        return {"wrote": str(path), "corpus": corpus, "sentences": len(sources), "tokens": catalogue.tokens,
                "latents_seen": int((catalogue.active > 0).sum())}
    catalogue = load_catalogue(args.dictionary, saved.dictionary.config.n)
    if args.latent is not None:
        return describe(translator, saved, catalogue, args.latent, args.contexts)
    try:
        found = piece_latents(translator, catalogue, args.piece, args.contexts)
    except DictionaryError as error:
        raise as_flag(error) from None
    return {"piece": args.piece, "point": saved.origin.point, "numbering": "latents from 0",
            "latents": [{"latent": j, "activation": round(v, 4),
                         "label": catalogue.label(j, translator.tokenizer.id_to_piece)} for j, v in found]}


def explained(args, saved, translator) -> dict:
    try:
        return {"sentence": args.sentence, **explanation(translator, saved, args.sentence, args.target, args.piece,
                                                         args.exact)}
    except DictionaryError as error:
        raise as_flag(error) from None


def as_flag(error: DictionaryError) -> DictionaryError:
    """The library's error about a "piece" as the command line names it: the --piece flag."""
    return DictionaryError(f"--{error}" if str(error).startswith("piece") else str(error))


if __name__ == "__main__":
    main()
