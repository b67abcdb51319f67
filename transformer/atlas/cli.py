"""python -m transformer.atlas build|neighbours (also `attention-explorer-atlas`).

    python -m transformer.atlas build checkpoints/en-de ../shared/data/tatoeba atlases/en-de --sentences 20000
    python -m transformer.atlas neighbours atlases/en-de --sentence "A dog runs." --token 2 --layer 3 --k 10

`neighbours` prints JSON; layers and token positions count from 1, like the API. A bad corpus, checkpoint, atlas
or setting ends the program with one line naming it (exit status 2), and nothing is written.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from ..checkpoint import CheckpointError, load_checkpoint
from ..command_line import CommandParser, answered, command_text, number_type, text_type
from ..core.head_ref import from_shown, shown
from ..core.probes import ATTENTION_KINDS, SOURCE, TARGET
from ..corpus.parallel import CorpusError
from ..paths import portable_words
from .build import BuildSettings, build_atlas, check_out, indexed_layers
from .corpus import read_corpus
from .maps import DEFAULT_SAMPLE
from .query import neighbours as nearest
from .query import sentence_vectors
from .reader import Atlas
from .store import stack

PROG = "python -m transformer.atlas"


def parser() -> CommandParser:
    top = CommandParser(prog=PROG, description=__doc__)
    commands = top.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    build = commands.add_parser("build", help="build an atlas of a checkpoint over a corpus", description=(
        "Runs CORPUS_DIR/train.<src> and train.<tgt> teacher-forced through CHECKPOINT and writes the atlas to OUT "
        "(which must not exist): token records, residual vectors after every layer, each head's sampled queries "
        "and keys, a nearest-neighbour index per layer and side, and each head's map."))
    build.add_argument("checkpoint", help="checkpoint folder, or a shipped one by name (en-de, de-en)")
    build.add_argument("corpus_dir", help="folder holding train.<src> and train.<tgt>, one sentence per line")
    build.add_argument("out", help="the atlas folder to create")
    build.add_argument("--sentences", type=number_type("--sentences", int, 1), default=None,
                       help="only the first N sentence pairs (default: all)")
    build.add_argument("--engine", choices=("local", "ray"), default="local",
                       help="local: this process (default); ray: Ray Data map_batches, a local Ray or the cluster "
                            "RAY_ADDRESS names (needs the atlas-cluster extra)")
    build.add_argument("--batch-size", type=number_type("--batch-size", int, 1, 4096), default=32,
                       help="sentence pairs per teacher-forced batch (default: 32)")
    build.add_argument("--threads", type=number_type("--threads", int, 1, 1024), default=None,
                       help="torch CPU threads (per Ray actor with --engine ray; default: torch's choice)")
    build.add_argument("--sample", type=number_type("--sample", int, 10, 10_000), default=None,
                       help="tokens per side whose queries and keys are kept for the maps, at most 10000 (default: "
                            f"{DEFAULT_SAMPLE['tsne']} with t-SNE maps, whose time grows with them; "
                            f"{DEFAULT_SAMPLE['pca']} with PCA maps)")
    build.add_argument("--projection", choices=("tsne", "pca"), default="tsne",
                       help="the maps' projection: tsne (openTSNE, default; about 2 s a head on 2 cores) or pca "
                            "(instant)")
    build.add_argument("--layers", type=layer_list, default=None,
                       help="layers whose residual vectors are stored and indexed, from 1, comma-separated "
                            "(default: all; a shipped atlas keeps the last to fit its size). The source side has "
                            "the encoder's layers, the target side the decoder's: a layer only the deeper stack has "
                            "is indexed on its side only")
    build.add_argument("--drop-samples", action="store_true",
                       help="with --projection pca: leave out the sampled query and key vectors once the maps are "
                            "made (PCA places new points without them); saves space, as a shipped atlas does")
    build.add_argument("--index-only", action="store_true",
                       help="keep the residual vectors only inside their index (which holds them exactly, as "
                            "float16), not also as .npy files: half the size, as a shipped atlas does")
    build.add_argument("--recall", type=number_type("--recall", float, 0.5, 1.0), default=0.95,
                       help="recall@10 against exact search the index is tuned to reach (default: 0.95)")
    ask = commands.add_parser("neighbours", help="the corpus tokens nearest to a token of a new sentence",
                              description="Prints JSON: the k corpus tokens whose residual vector after LAYER is "
                                          "nearest to that of token N of the sentence (source side) or of its greedy "
                                          "translation (target side), with their sentence pairs.")
    ask.add_argument("atlas", help="an atlas folder made by `build`")
    ask.add_argument("--sentence", type=text_type("--sentence"), required=True,
                     help="a sentence in the checkpoint's source language")
    ask.add_argument("--token", type=number_type("--token", int, 1), required=True,
                     help="which token, counted from 1 (the source's pieces, or its translation's)")
    ask.add_argument("--layer", type=number_type("--layer", int, 1), required=True, help="layer, counted from 1")
    ask.add_argument("--side", choices=(SOURCE, TARGET), default=SOURCE, help="source (default) or target")
    ask.add_argument("--k", type=number_type("--k", int, 1, 100), default=10, help="how many neighbours (default 10)")
    ask.add_argument("--checkpoint", default=None,
                     help="the atlas's checkpoint, where it has moved (default: the one atlas.json names)")
    return top


def layer_list(text: str) -> tuple[int, ...]:
    """--layers: "4" or "1,4", numbered from 1 -> 0-based layers (their range is checked against the model)."""
    convert = number_type("--layers", int, 1)
    return tuple(from_shown(convert(part)) for part in text.split(","))


class StageBars:
    """One tqdm bar (with its ETA) per build stage, opened when the stage starts."""

    def __init__(self, totals: dict):
        from tqdm import tqdm

        self.tqdm, self.totals, self.bars = tqdm, totals, {}

    def __call__(self, stage: str, done: int, what: str | None = None) -> None:
        if stage not in self.bars:
            for bar in self.bars.values():
                bar.close()
            self.bars[stage] = self.tqdm(total=self.totals.get(stage), desc=stage, file=sys.stderr)
        if what:  # the step just done (a map's kind, layer and head), beside the bar
            self.bars[stage].set_postfix_str(what, refresh=False)
        self.bars[stage].update(done)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def build(args, argv) -> None:
    check_out(Path(args.out))  # before the checkpoint and the corpus are read
    settings = BuildSettings(args.sentences, args.engine, args.batch_size, args.threads, args.sample,
                             args.projection, args.recall, layers=args.layers,
                             keep_samples=not args.drop_samples, keep_vectors=not args.index_only)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    model, _, config = load_checkpoint(args.checkpoint)
    sentences = len(read_corpus(args.corpus_dir, config.get("languages", {"src": "en", "tgt": "de"}),
                                args.sentences)[0])
    indexed = sum(len(layers) for layers in indexed_layers(settings, model.config).values())
    heads = sum(stack(model.config, kind).layers * stack(model.config, kind).heads for kind in ATTENTION_KINDS)
    bars = StageBars({"extracting": sentences, "indexing": indexed, "maps": heads})
    try:
        manifest = build_atlas(args.checkpoint, args.corpus_dir, args.out, settings, bars,
                               command_text("transformer.atlas", portable_words(argv or sys.argv[1:])))
    finally:
        bars.close()
    recall = min(v["recall_at_10"] for v in manifest["index"]["per_layer"].values())
    print(f"wrote {args.out}: {manifest['counts']['sentences']} pairs, {sum(manifest['counts']['tokens'].values())} "
          f"tokens, lowest recall@10 {recall}, {manifest['seconds']}")


def neighbours(args) -> None:
    atlas = Atlas.open(args.atlas)
    folder = atlas.check_checkpoint(args.checkpoint or atlas.checkpoint["path"])
    model, tokenizer, _ = load_checkpoint(folder)
    layer = from_shown(args.layer)
    vectors = sentence_vectors(model, tokenizer, args.sentence)
    found = nearest(atlas, vectors, from_shown(args.token), layer, args.side, args.k)
    print(json.dumps({
        "sentence": args.sentence, "translation": vectors.translation, "side": args.side, "layer": shown(layer),
        "token": args.token, "piece": vectors.pieces[args.side][from_shown(args.token)],
        "numbering": "layers and positions from 1; distances Euclidean between float16 residual vectors",
        "neighbours": [{**asdict(n), "sentence": shown(n.sentence), "position": shown(n.position),
                        "distance": round(n.distance, 6)} for n in found],
    }, ensure_ascii=False, indent=1))


def main(argv=None) -> None:
    top = parser()
    args = top.parse_args(argv)
    with answered(top, CheckpointError, CorpusError):
        if args.command == "build":
            build(args, argv)
        else:
            neighbours(args)


if __name__ == "__main__":
    main()
