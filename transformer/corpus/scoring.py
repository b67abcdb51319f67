"""Scoring a model on a corpus: translate it in batches, sacreBLEU and chrF against references, and the
teacher-forced loss (the training objective, and what head importance measures with heads switched off)."""
from __future__ import annotations

from dataclasses import dataclass

import sacrebleu
import torch
import torch.nn.functional as F

from ..decoding.translator import Translator
from ..tokenizer import Tokenizer
from .data import ParallelCorpus


def translate_corpus(translator: Translator, sentences: list[str], strategy: str = "greedy", batch_size: int = 64,
                     progress=None, **settings) -> list[str]:
    """Translates in batches of similar length (less padding), returning outputs in input order.
    `settings` are the strategy's settings by name (see decoding/strategies)."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    outputs = [""] * len(sentences)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        results = translator.translate_batch([sentences[i] for i in batch], strategy=strategy, **settings)
        for index, result in zip(batch, results):
            outputs[index] = result.text
        if progress is not None:
            progress(len(batch))
    return outputs


def score(hypotheses: list[str], references: list[str]) -> dict:
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu_score, chrf_score = bleu.corpus_score(hypotheses, [references]), chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": round(bleu_score.score, 2), "chrf": round(chrf_score.score, 2),
        "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature()),
        "sentences": len(hypotheses),
    }


@dataclass
class EncodedCorpus:
    source: list[list[int]]  # each ends with EOS
    target: list[list[int]]  # each is BOS ... EOS

    @classmethod
    def build(cls, corpus: ParallelCorpus, tokenizer: Tokenizer, max_len: int) -> "EncodedCorpus":
        eos, start = tokenizer.eos_id, tokenizer.bos_id
        source = [ids[: max_len - 1] + [eos] for ids in tokenizer.encode_batch(corpus.source)]
        target = [[start] + ids[: max_len - 2] + [eos] for ids in tokenizer.encode_target_batch(corpus.target)]
        return cls(source, target)

    def lengths(self) -> list[int]:
        return [max(len(s), len(t)) for s, t in zip(self.source, self.target)]


def batch_loss(model, src, tgt, label_smoothing: float, autocast: bool, pad_id: int):
    """Teacher forcing: decoder input BOS..y[-2], targets y[1]..EOS. Returns (summed loss, target tokens).
    `model` may be the Transformer or its DistributedDataParallel wrapper."""
    decoder_input, targets = tgt[:, :-1], tgt[:, 1:]
    with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=autocast):
        logits = model(src, decoder_input)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1),
                           ignore_index=pad_id, label_smoothing=label_smoothing, reduction="sum")
    return loss, int((targets != pad_id).sum())
