"""The training loop: token-count batches, label-smoothed loss, Adam with inverse-square-root warm-up,
bfloat16 autocast, gradient clipping, validation each epoch, best-N checkpoints kept for averaging.

Library code: reports progress through the `on_*` callbacks; the CLI (`train.py`) draws the bar.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..core.model import Transformer
from ..decoding.translator import Translator
from ..tokenizer import BOS_ID, EOS_ID, Tokenizer
from .data import ParallelCorpus, pad, token_batches
from .evaluate import score, translate_corpus


@dataclass
class TrainingSettings:
    max_tokens: int = 4096  # padded tokens per batch (the longer side counts)
    epochs: int = 30
    max_minutes: float | None = None  # stop cleanly when this wall-clock budget is spent
    lr: float = 1e-3  # peak learning rate, reached at the end of warm-up
    warmup: int = 800  # updates of linear warm-up before the 1/sqrt(step) decay
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    bf16: bool = True
    keep_best: int = 5  # checkpoints (by val BLEU) kept for averaging
    seed: int = 1
    val_batch_size: int = 100


def learning_rate(step: int, settings: TrainingSettings) -> float:
    """Inverse-square-root schedule (Vaswani et al., 2017, 5.3), expressed by its peak rather than d_model."""
    step = max(step, 1)
    return settings.lr * min(step / settings.warmup, math.sqrt(settings.warmup / step))


def bf16_supported(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


@dataclass
class EncodedCorpus:
    source: list[list[int]]  # each ends with EOS
    target: list[list[int]]  # each is BOS ... EOS

    @classmethod
    def build(cls, corpus: ParallelCorpus, tokenizer: Tokenizer, max_len: int) -> "EncodedCorpus":
        source = [ids[: max_len - 1] + [EOS_ID] for ids in tokenizer.encode_batch(corpus.source)]
        target = [[BOS_ID] + ids[: max_len - 2] + [EOS_ID] for ids in tokenizer.encode_batch(corpus.target)]
        return cls(source, target)

    def lengths(self) -> list[int]:
        return [max(len(s), len(t)) for s, t in zip(self.source, self.target)]


def batch_loss(model: Transformer, src, tgt, label_smoothing: float, autocast: bool):
    """Teacher forcing: decoder input BOS..y[-2], targets y[1]..EOS. Returns (summed loss, target tokens)."""
    decoder_input, targets = tgt[:, :-1], tgt[:, 1:]
    with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=autocast):
        logits = model(src, decoder_input)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1),
                           ignore_index=model.config.pad_id, label_smoothing=label_smoothing, reduction="sum")
    return loss, int((targets != model.config.pad_id).sum())


@dataclass
class EpochReport:
    epoch: int
    updates: int
    train_loss: float
    val_loss: float
    val_bleu: float
    val_chrf: float
    minutes: float


@dataclass
class TrainingResult:
    reports: list[EpochReport] = field(default_factory=list)
    best_states: list[tuple[float, int, dict]] = field(default_factory=list)  # (val BLEU, epoch, state)
    updates: int = 0
    seconds: float = 0.0
    stopped_early: bool = False  # the --max-minutes budget ended training


@torch.no_grad()
def validation_loss(model, data: EncodedCorpus, settings: TrainingSettings, autocast: bool) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for batch in token_batches(data.lengths(), settings.max_tokens, shuffle=False):
        src = pad([data.source[i] for i in batch], model.config.pad_id).to(model.device)
        tgt = pad([data.target[i] for i in batch], model.config.pad_id).to(model.device)
        loss, n = batch_loss(model, src, tgt, 0.0, autocast)
        total, tokens = total + float(loss), tokens + n
    return total / max(tokens, 1)


def validate(model, tokenizer, val: ParallelCorpus, val_data: EncodedCorpus, settings, autocast) -> tuple[float, dict]:
    loss = validation_loss(model, val_data, settings, autocast)
    hypotheses = translate_corpus(Translator(model, tokenizer), val.source, "greedy", batch_size=settings.val_batch_size)
    return loss, score(hypotheses, val.target)


def train(model: Transformer, tokenizer: Tokenizer, train_corpus: ParallelCorpus, val: ParallelCorpus,
          settings: TrainingSettings, on_batch=None, on_epoch=None) -> TrainingResult:
    """on_batch(updates, tokens, loss_per_token, batches_this_epoch); on_epoch(EpochReport, TrainingResult).
    Returns the best states by val BLEU, for averaging."""
    torch.manual_seed(settings.seed)
    device = model.device
    autocast = settings.bf16 and bf16_supported(device)
    model.use_fused_attention(False)  # measured: the explicit path trains ~1.4x faster on CPU for short sentences
    train_data = EncodedCorpus.build(train_corpus, tokenizer, model.config.max_len)
    val_data = EncodedCorpus.build(val, tokenizer, model.config.max_len)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr, betas=(0.9, 0.98), eps=1e-9)
    result = TrainingResult()
    started = time.perf_counter()
    deadline = started + settings.max_minutes * 60 if settings.max_minutes is not None else math.inf
    lengths = train_data.lengths()
    for epoch in range(1, settings.epochs + 1):
        model.train()
        epoch_loss, epoch_tokens = 0.0, 0
        batches = token_batches(lengths, settings.max_tokens, shuffle=True, seed=settings.seed * 1000 + epoch)
        for batch in batches:
            if time.perf_counter() > deadline:
                result.stopped_early = True
                break
            src = pad([train_data.source[i] for i in batch], model.config.pad_id).to(device)
            tgt = pad([train_data.target[i] for i in batch], model.config.pad_id).to(device)
            loss, tokens = batch_loss(model, src, tgt, settings.label_smoothing, autocast)
            optimizer.zero_grad(set_to_none=True)
            (loss / tokens).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip_norm)
            result.updates += 1
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(result.updates, settings)
            optimizer.step()
            epoch_loss, epoch_tokens = epoch_loss + float(loss.detach()), epoch_tokens + tokens
            if on_batch:
                on_batch(result.updates, int(src.numel() + tgt.numel()), float(loss.detach()) / tokens, len(batches))
        if result.stopped_early and epoch_tokens == 0:
            break
        model.use_fused_attention(True)
        val_loss, val_scores = validate(model, tokenizer, val, val_data, settings, autocast)
        model.use_fused_attention(False)
        report = EpochReport(epoch, result.updates, epoch_loss / max(epoch_tokens, 1), val_loss,
                             val_scores["bleu"], val_scores["chrf"], (time.perf_counter() - started) / 60)
        result.reports.append(report)
        result.best_states.append((report.val_bleu, epoch, copy.deepcopy({k: v.cpu() for k, v in model.state_dict().items()})))
        result.best_states = sorted(result.best_states, key=lambda s: -s[0])[: settings.keep_best]
        if on_epoch:
            on_epoch(report, result)
        if result.stopped_early:
            break
    model.use_fused_attention(True)
    result.seconds = time.perf_counter() - started
    return result
