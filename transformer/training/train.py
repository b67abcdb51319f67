"""Train an encoder-decoder Transformer on a parallel corpus and write a checkpoint folder.

    python -m transformer.train --src en --tgt de --out runs/en-de
    python -m transformer.train --resume runs/en-de --max-minutes 150     # continue that run exactly
    torchrun --standalone --nproc_per_node=2 -m transformer.train --out runs/ddp ...   # data parallel (gloo / NCCL)

Reads {train,val}.{src,tgt} (and test_2016_flickr, only to report it at the end) from --data-dir,
trains a joint sentencepiece vocabulary on the training split only, trains with token-count batches,
validates (loss and greedy BLEU) after every epoch, records the attention-across-training timeline on
8 probe sentences, averages the best checkpoints by val BLEU, and writes config.json, model.safetensors,
spm.model, metrics.json and timeline.*. The run's state is saved under OUT/resume/ after every epoch and
when a budget stops it, so `--resume OUT` continues where it stopped.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from tqdm import tqdm

from ..checkpoint import TOKENIZER_FILE, checkpoint_folder, load_checkpoint, save_checkpoint, unique_state_dict
from ..command_line import CommandParser, number_type
from ..core.config import NORM_PLACEMENTS, POSITIONAL_ENCODINGS, ModelConfig
from ..core.model import Transformer
from ..corpus.data import default_data_dir, read_parallel_or_exit
from ..corpus.mix import mix_parts
from ..decoding.translator import Translator
from ..tokenizer import Tokenizer
from .finalize import finish, model_with, reported_tests
from .reproduce import is_default, reproduce_command
from .resume import RESUME_DIR, load_run, save_run, saved_args
from .timeline import Timeline, stage_label
from .trainer import TrainingSettings, train

# what may change when a run is resumed: its budgets and where it runs; everything else is the run's own
RESUMABLE_OVERRIDES = ("max_minutes", "max_updates", "epochs", "threads", "device", "data_dir", "save_epochs")


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description's examples kept line by line, and every flag's default shown (where it has one: a flag
    whose absence means something, such as --threads, says what in its own help)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="python -m transformer.train", description=__doc__, formatter_class=HelpFormatter)
    data = p.add_argument_group("data")
    data.add_argument("--data-dir", default=default_data_dir(), help="folder of {split}.{lang} files")
    data.add_argument("--src", default="en", help="source language suffix")
    data.add_argument("--tgt", default="de", help="target language suffix")
    data.add_argument(
        "--test-split", default="test_2016_flickr", help="split reported (never used for selection); '' to skip"
    )
    data.add_argument("--out", help="checkpoint folder to write (required unless --resume)")
    data.add_argument(
        "--vocab-size", type=number_type("--vocab-size", int), default=8000, help="joint sentencepiece vocabulary size"
    )
    data.add_argument("--tokenizer", help="use this sentencepiece model (made by an earlier run on the same training "
                                          "split) instead of training one; --vocab-size is then its size")
    model = p.add_argument_group("model (with --init-from only the two dropouts apply; the shape is the checkpoint's)")
    model.add_argument("--d-model", type=number_type("--d-model", int), default=256, help="width of every layer")
    model.add_argument(
        "--n-heads",
        type=number_type("--n-heads", int),
        default=4,
        help="attention heads per layer (must divide --d-model)",
    )
    model.add_argument("--n-layers", type=number_type("--n-layers", int), default=3, help="layers per stack")
    model.add_argument("--d-ff", type=number_type("--d-ff", int), default=1024, help="feed-forward inner width")
    model.add_argument(
        "--dropout",
        type=number_type("--dropout", float),
        default=0.3,
        help="dropout on the embeddings and on every sub-layer output",
    )
    model.add_argument(
        "--attention-dropout",
        type=number_type("--attention-dropout", float),
        default=0.1,
        help="dropout on the attention probabilities",
    )
    model.add_argument(
        "--max-len", type=number_type("--max-len", int), default=128, help="longest sequence (positions)"
    )
    model.add_argument(
        "--norm", choices=NORM_PLACEMENTS, default="pre", help="LayerNorm before (pre) or after (post) each sublayer"
    )
    model.add_argument(
        "--pos-encoding",
        choices=POSITIONAL_ENCODINGS,
        default="sinusoidal",
        help="fixed sinusoids or learned positions",
    )
    model.add_argument("--no-share-embeddings", action="store_true", help="separate source/target embeddings")
    model.add_argument(
        "--no-tie-output", action="store_true", help="untie the output projection from the target embedding"
    )
    opt = p.add_argument_group("optimisation")
    opt.add_argument(
        "--epochs", type=number_type("--epochs", int), default=80, help="passes over the training split, at most"
    )
    opt.add_argument("--max-minutes", type=number_type("--max-minutes", float), default=None,
                     help="stop cleanly and save once this session has trained this long (resume to go on)")
    opt.add_argument(
        "--max-updates",
        type=number_type("--max-updates", int),
        default=None,
        help="stop cleanly after this many updates in all",
    )
    opt.add_argument(
        "--max-tokens", type=number_type("--max-tokens", int), default=3000, help="padded tokens per (global) batch"
    )
    opt.add_argument("--lr", type=number_type("--lr", float), default=1.2e-3, help="peak learning rate")
    opt.add_argument("--warmup", type=number_type("--warmup", int), default=500, help="warm-up updates")
    opt.add_argument(
        "--label-smoothing",
        type=number_type("--label-smoothing", float),
        default=0.1,
        help="share of the target probability spread over the vocabulary",
    )
    opt.add_argument(
        "--clip-norm", type=number_type("--clip-norm", float), default=1.0, help="gradient norm clipped to this"
    )
    opt.add_argument(
        "--average",
        type=number_type("--average", int),
        default=5,
        help="average the best N epochs by val BLEU (1: no averaging)",
    )
    opt.add_argument(
        "--no-bf16", action="store_true", help="train in float32 even where bfloat16 autocast is supported"
    )
    opt.add_argument(
        "--seed", type=number_type("--seed", int), default=1, help="seeds initialisation, data order and dropout"
    )
    opt.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train")
    opt.add_argument(
        "--threads",
        type=number_type("--threads", int),
        default=None,
        help="torch CPU threads per process (none given: all cores)",
    )
    opt.add_argument("--init-from", help="start from this checkpoint folder's weights and tokenizer, fresh optimizer")
    opt.add_argument("--resume", metavar="OUT", help="continue the run that writes OUT exactly where it stopped")
    opt.add_argument(
        "--save-epochs", action="store_true", help="also write every epoch's weights (float16) to OUT/epochs/"
    )
    dec = p.add_argument_group("decoding used for the reported scores")
    dec.add_argument(
        "--beam-size",
        type=number_type("--beam-size", int),
        default=4,
        help="beam width for the val and test scores at the end",
    )
    dec.add_argument(
        "--length-penalty",
        type=number_type("--length-penalty", float),
        default=0.6,
        help="GNMT length penalty for those scores (tune it afterwards with transformer.tune_length_penalty)",
    )
    return p


def resolve_args(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """The command line, or with --resume the run's saved arguments with only its budgets overridden."""
    args = parser.parse_args(argv)
    if args.resume:
        given = {k for k, v in vars(args).items() if v != parser.get_default(k)}
        merged = {**saved_args(args.resume), **{k: getattr(args, k) for k in RESUMABLE_OVERRIDES if k in given}}
        args = argparse.Namespace(**{**vars(args), **merged, "resume": args.resume, "out": args.resume})
    elif not args.out:
        parser.error("--out is required (or --resume OUT to continue a run)")
    for name in ("epochs", "max_tokens", "warmup", "average", "vocab_size", "beam_size"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    for name in ("max_minutes", "max_updates"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative, got {getattr(args, name)}")
    if args.data_dir is None:
        parser.error("no --data-dir given and ../shared/data/multi30k does not exist "
                     "(python -m transformer.data download fetches Multi30k there)")
    if args.tokenizer and args.init_from:
        parser.error("--tokenizer and --init-from both choose the tokenizer: a warm start keeps its checkpoint's")
    if args.tokenizer and not args.resume:
        try:
            Tokenizer.load(args.tokenizer)
        except (FileNotFoundError, ValueError) as error:
            parser.error(f"--tokenizer: {error}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but CUDA is not available")
    return args


def start_processes(args) -> tuple[int, int, torch.device]:
    """(rank, world size, device); under torchrun joins the process group: gloo on CPU, NCCL on CUDA."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, torch.device(args.device)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local}") if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return dist.get_rank(), world, device


def build_model(args, train_corpus, device, rank: int, world: int) -> tuple[Transformer, Tokenizer, Path]:
    """The model and tokenizer to train; the tokenizer file lives in OUT/resume/ for the whole run."""
    out = Path(args.out)
    tokenizer_file = out / RESUME_DIR / TOKENIZER_FILE
    if args.init_from:
        loaded, tokenizer, _ = load_checkpoint(args.init_from, device)
        tokenizer_file = checkpoint_folder(args.init_from) / TOKENIZER_FILE
        # regularisation is a training choice, so a warm start may train with other dropouts than its checkpoint had
        config = dataclasses.replace(loaded.config, dropout=args.dropout, attention_dropout=args.attention_dropout)
        model = Transformer(config).to(device)
        model.load_state_dict(loaded.state_dict())
        return model.train(), tokenizer, tokenizer_file
    if args.tokenizer and not args.resume and rank == 0:
        tokenizer_file.parent.mkdir(parents=True, exist_ok=True)
        tokenizer_file.write_bytes(Path(args.tokenizer).read_bytes())
    elif not args.resume and rank == 0:
        Tokenizer.train([train_corpus.source_file, train_corpus.target_file], tokenizer_file, args.vocab_size)
    if world > 1:
        dist.barrier()  # rank 0 trained the vocabulary; the others read it
    tokenizer = Tokenizer.load(tokenizer_file)
    config = ModelConfig(
        src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=args.d_model,
        n_heads=args.n_heads, n_layers=args.n_layers, d_ff=args.d_ff, dropout=args.dropout,
        attention_dropout=args.attention_dropout, max_len=args.max_len, norm=args.norm, final_norm=args.norm == "pre",
        pos_encoding=args.pos_encoding, share_embeddings=not args.no_share_embeddings,
        tie_output=not args.no_tie_output, pad_id=tokenizer.pad_id,
    )
    torch.manual_seed(args.seed)  # the same initial weights in every process
    return Transformer(config).to(device), tokenizer, tokenizer_file


def main(argv=None) -> None:
    parser = build_parser()
    args = resolve_args(parser, argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rank, world, device = start_processes(args)
    out = Path(args.out)
    # a bad corpus is one line naming the file, before anything is written to --out
    train_corpus = read_parallel_or_exit(args.data_dir, "train", args.src, args.tgt)
    val = read_parallel_or_exit(args.data_dir, "val", args.src, args.tgt)
    for folder, split in reported_tests(args).values():  # read at the end; checked now, not after hours of training
        read_parallel_or_exit(folder, split, args.src, args.tgt)
    model, tokenizer, tokenizer_file = build_model(args, train_corpus, device, rank, world)
    settings = TrainingSettings(max_tokens=args.max_tokens, epochs=args.epochs, max_minutes=args.max_minutes,
                                max_updates=args.max_updates, lr=args.lr, warmup=args.warmup,
                                label_smoothing=args.label_smoothing, clip_norm=args.clip_norm, bf16=not args.no_bf16,
                                keep_best=args.average, seed=args.seed,
                                val_parts={part.name: part.val for part in mix_parts(args.data_dir)})
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, betas=(0.9, 0.98), eps=1e-9)
    result = None
    if args.resume:
        result = load_run(out, model, optimizer)
        result.stopped_early = False
    run_args = {k: v for k, v in vars(args).items() if k != "resume"}
    extra_config = {"languages": {"src": args.src, "tgt": args.tgt},
                    "tokenizer": {"type": "sentencepiece", "file": TOKENIZER_FILE, "vocab_size": tokenizer.vocab_size,
                                  "joint": True, "pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}}
    own_data = None if is_default(args.data_dir, default_data_dir()) else str(args.data_dir)
    timeline = (Timeline.load(out) or Timeline.for_language(args.src, stage_label(args.init_from, own_data))
                if rank == 0 else None)
    if rank == 0:
        print(
            f"model: {model.num_parameters():,} parameters; train {len(train_corpus):,} pairs, val {len(val):,}; "
            f"{world} process(es)"
            f"{'; resuming at epoch %d, update %d' % (result.epoch, result.updates) if result else ''}",
            flush=True,
        )
    bar = tqdm(unit="batch", dynamic_ncols=True, mininterval=2, disable=rank != 0)
    tokens_seen, bar_started = [0], time.perf_counter()

    def on_batch(updates, tokens, loss, batches_per_epoch):
        if bar.total is None:
            bar.total = settings.epochs * batches_per_epoch
            bar.update(updates - 1)
        tokens_seen[0] += tokens
        rate = tokens_seen[0] / (time.perf_counter() - bar_started)
        bar.set_postfix_str(f"loss {loss:.3f} {rate:,.0f} tok/s", refresh=False)
        bar.update(1)

    def on_epoch(report, result):
        by_corpus = "".join(f" {name} {bleu:.2f}" for name, bleu in report.val_bleu_by_corpus.items())
        tqdm.write(
            f"epoch {report.epoch}: updates {report.updates} train loss {report.train_loss:.3f} "
            f"val loss {report.val_loss:.3f} val BLEU {report.val_bleu:.2f}{by_corpus} chrF {report.val_chrf:.2f} "
            f"({report.minutes:.1f} min)"
        )
        # the best epoch so far goes to disk, so an interrupted run still leaves a usable checkpoint
        save_checkpoint(out, model_with(model.config, result.best_states[0][2], device), tokenizer_file, extra_config)
        timeline.record(Translator(model, tokenizer), report.epoch, report.train_loss, report.val_bleu)
        timeline.save(out)
        if args.save_epochs:
            save_epoch_weights(out / "epochs", report.epoch, model)
        save_run(out, model, optimizer, result, run_args, tokenizer_file)

    def on_stop(result):
        save_run(out, model, optimizer, result, run_args, tokenizer_file)
        tqdm.write(f"stopped at epoch {result.epoch}, update {result.updates}: resume with "
                   f"python -m transformer.train --resume {out}")

    result = train(model, tokenizer, train_corpus, val, settings, on_batch=on_batch, on_epoch=on_epoch, on_stop=on_stop,
                   optimizer=optimizer, result=result)
    bar.close()
    if world > 1:
        # every process tears the group down together: one that shuts gloo down while rank 0 still saves was
        # seen to abort ("terminate called without an active exception") in CI
        dist.barrier()
        dist.destroy_process_group()
    if rank != 0:
        return
    if not result.reports:
        # a budget stopped the run inside its first epoch: a clean, resumable stop (the state is in OUT/resume/),
        # not a failure, so a short run under torchrun exits 0 too; there is just no epoch to validate or ship yet
        print(f"the first epoch has not ended, so no checkpoint was written yet; continue with "
              f"python -m transformer.train --resume {out}")
        return
    command = reproduce_command(parser, args, result.updates, result.stopped_early)
    scores = finish(out, model, result, tokenizer, tokenizer_file, extra_config, settings, train_corpus, val, args,
                    device, command, argv if argv is not None else sys.argv[1:])
    for split, s in scores.items():
        print(f"{split}: BLEU {s['bleu']} chrF {s['chrf']} (beam {args.beam_size})  {s['bleu_signature']}")
    print(f"wrote {out}")


def save_epoch_weights(folder: Path, epoch: int, model: Transformer) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: t.detach().to("cpu", torch.float16).contiguous() for name, t in unique_state_dict(model).items()}
    save_file(state, str(folder / f"epoch-{epoch:03d}.safetensors"), metadata={"format": "pt", "epoch": str(epoch)})


if __name__ == "__main__":
    main()
