"""The corpus an atlas is built from, tokenized once up front: every token's row is known before the model runs, so
the engines can write each batch's vectors straight to their rows, in any order, and the sample of tokens whose
queries and keys are kept is drawn before the first batch.

Teacher forcing: the source is its pieces + </s>; the target side's tokens are the reference's pieces + </s>, the
tokens the decoder predicts, and the decoder reads the start token, then the reference shifted by one. A target
token's vectors are those of the position that predicted it, as the explorer's views label decoder rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..corpus.parallel import CorpusError, read_parallel
from ..path_checks import not_a_folder
from .store import SIDES, AtlasError

SPLIT = "train"  # CORPUS_DIR holds train.<src> and train.<tgt>, as the project's corpora do


@dataclass
class TokenizedCorpus:
    source_text: list[str]
    target_text: list[str]
    ids: dict[str, list[list[int]]]  # side -> per sentence, its token ids (source + </s>; reference + </s>)
    offsets: dict[str, np.ndarray]  # side -> (sentences + 1,) first token row of each sentence, then the total

    def __len__(self) -> int:
        return len(self.source_text)

    def tokens(self, side: str) -> int:
        return int(self.offsets[side][-1])

    def rows(self, side: str, sentence: int) -> slice:
        return slice(int(self.offsets[side][sentence]), int(self.offsets[side][sentence + 1]))


def read_corpus(folder, languages: dict, limit: int | None) -> tuple[list[str], list[str]]:
    """The first `limit` pairs of train.<src> / train.<tgt>; mismatched line counts or a missing file end in one
    line naming the files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AtlasError(f"{folder}: corpus folder {not_a_folder(folder)} (it must hold {SPLIT}.{languages['src']} and "
                         f"{SPLIT}.{languages['tgt']})")
    try:
        corpus = read_parallel(folder, SPLIT, languages["src"], languages["tgt"])
    except CorpusError as error:
        raise AtlasError(str(error)) from None
    return corpus.source[:limit], corpus.target[:limit]


def tokenize(tokenizer, source: list[str], target: list[str], max_len: int) -> TokenizedCorpus:
    """Token ids of every pair, each side cut to the model's `max_len` positions (with its </s>)."""
    room = max_len - 1
    ids = {
        SIDES[0]: [s[:room] + [tokenizer.eos_id] for s in tokenizer.encode_batch(source)],
        SIDES[1]: [t[:room] + [tokenizer.eos_id] for t in tokenizer.encode_target_batch(target)],
    }
    offsets = {side: np.concatenate([[0], np.cumsum([len(s) for s in ids[side]])]).astype(np.int64) for side in SIDES}
    return TokenizedCorpus(source, target, ids, offsets)


def batches(corpus: TokenizedCorpus, batch_size: int) -> list[np.ndarray]:
    """Sentence indices in batches of similar source length (less padding), in a fixed order: both engines run
    exactly these batches, so they compute the same numbers."""
    lengths = np.array([len(s) + len(t) for s, t in zip(corpus.ids[SIDES[0]], corpus.ids[SIDES[1]])])
    order = np.argsort(lengths, kind="stable")
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def sample_rows(corpus: TokenizedCorpus, size: int, seed: int) -> dict[str, np.ndarray]:
    """side -> sorted token rows whose queries and keys are kept (at most `size`), drawn uniformly."""
    rng = np.random.default_rng(seed)
    chosen = {}
    for side in SIDES:
        total = corpus.tokens(side)
        chosen[side] = np.sort(rng.choice(total, size=min(size, total), replace=False)).astype(np.int64)
    return chosen
