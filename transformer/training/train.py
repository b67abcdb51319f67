"""Train an encoder-decoder Transformer on a parallel corpus and write a checkpoint folder: `python -m
transformer.train --help` (train_args.py) says how; the run's steps are `main`'s."""
from __future__ import annotations

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
from ..core.config import ModelConfig
from ..core.model import Transformer
from ..corpus.data import default_data_dir, read_parallel_or_exit
from ..corpus.mix import mix_parts
from ..decoding.translator import Translator
from ..tokenizer import Tokenizer
from .finalize import finish, model_with, reported_tests
from .reproduce import is_default, reproduce_command
from .resume import RESUME_DIR, load_run, save_run
from .timeline import Timeline, stage_label
from .train_args import build_parser, resolve_args
from .trainer import TrainingSettings, train


# what may change when a run is resumed: its budgets and where it runs; everything else is the run's own
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
    bar, on_batch, on_epoch, on_stop = run_callbacks(args, out, model, optimizer, settings, tokenizer,
                                                     tokenizer_file, extra_config, timeline, device, rank)
    result = train(model, tokenizer, train_corpus, val, settings, on_batch=on_batch, on_epoch=on_epoch, on_stop=on_stop,
                   optimizer=optimizer, result=result)
    bar.close()
    if world > 1:
        end_processes()
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


def run_callbacks(args, out: Path, model, optimizer, settings, tokenizer, tokenizer_file, extra_config: dict,
                  timeline, device, rank: int):
    """What the training loop calls: a progress bar's tick per batch; per epoch its line, the best checkpoint so far,
    the timeline and the resumable state; at a budget's stop the state. Returns the bar and the three callbacks."""
    run_args = {k: v for k, v in vars(args).items() if k != "resume"}
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

    return bar, on_batch, on_epoch, on_stop


def end_processes() -> None:
    # every process tears the group down together: one that shuts gloo down while rank 0 still saves was seen to
    # abort ("terminate called without an active exception") in CI
    dist.barrier()
    dist.destroy_process_group()


def save_epoch_weights(folder: Path, epoch: int, model: Transformer) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: t.detach().to("cpu", torch.float16).contiguous() for name, t in unique_state_dict(model).items()}
    save_file(state, str(folder / f"epoch-{epoch:03d}.safetensors"), metadata={"format": "pt", "epoch": str(epoch)})


if __name__ == "__main__":
    main()
