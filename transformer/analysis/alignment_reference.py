"""The sentences an alignment evaluation reads, as pieces and as words, and the reference alignments it scores against:
a Pharaoh file (`--reference`), or eflomal's links over our words (statistical_aligner.py), symmetrized."""
from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from ..command_line import InputError
from ..corpus.data import REPOSITORY
from ..corpus.parallel import ParallelCorpus
from ..corpus.scoring import EncodedCorpus
from ..decoding.words import word_groups, word_label
from ..tokenizer import Tokenizer
from .alignment import BOUNDARY_TOKENS, Alignment, parse_pharaoh
from .statistical_aligner import EflomalSettings, eflomal_links, eflomal_version
from .symmetrize import SYMMETRIZATIONS


def words_of(pieces: Sequence[str]) -> list[str]:
    """The words of a piece sequence that alignments index: word groups without <s> and </s>, as
    analysis/alignment.py's `word_attention` keeps them."""
    return [word_label(list(pieces), group) for group in word_groups(list(pieces))
            if not (len(group) == 1 and pieces[group[0]] in BOUNDARY_TOKENS)]


def aligner_token(word: str) -> str:
    """What eflomal sees for one of our words: one whitespace-free token, punctuation stripped from the ends
    (unless nothing else is left), so "Zaun." and "Zaun" share their statistics."""
    token = "".join(word.split())
    stripped = token.strip("".join({c for c in token if unicodedata.category(c).startswith("P")}))
    return stripped or token


@dataclass
class PieceSentence:
    """One (source, reference) pair as the model reads it teacher-forced."""

    src_ids: list[int]  # ends with </s>
    tgt_ids: list[int]  # <s> reference </s>
    src_pieces: list[str]
    tgt_pieces: list[str]  # what each cross-attention row predicted: the reference pieces, then </s>


def piece_sentences(tokenizer: Tokenizer, sources: Sequence[str], targets: Sequence[str], max_len: int
                    ) -> list[PieceSentence]:
    """Encoded and cut exactly as training and the log-likelihood in importance.py encode them."""
    encoded = EncodedCorpus.build(ParallelCorpus(list(sources), list(targets), Path(), Path()), tokenizer, max_len)
    piece = tokenizer.id_to_piece
    return [PieceSentence(src, tgt, [piece(i) for i in src], [piece(i) for i in tgt[1:]])
            for src, tgt in zip(encoded.source, encoded.target)]


def read_reference(path, sentences: Sequence[PieceSentence], split: str) -> list[Alignment]:
    """The --reference file: one Pharaoh line per sentence of the split, every link on an existing word; a file
    that is missing, malformed, of another length or made on other words is an InputError naming it."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{path}: the reference alignment file is missing") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: the reference alignment file cannot be read as text ({error})") from None
    reference = []
    for number, line in enumerate(lines, start=1):
        try:
            reference.append(parse_pharaoh(line))
        except ValueError as error:
            raise InputError(f"{path}, line {number}: {error}") from None
    if len(reference) != len(sentences):
        raise InputError(f"{path} has {len(reference)} lines; {split} has {len(sentences)} sentences")
    try:
        check_reference(reference, sentences)
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None
    return reference


def check_reference(reference: Sequence[Alignment], sentences: Sequence[PieceSentence]) -> None:
    """Every link must point at an existing word of its sentence, or the words do not line up."""
    for number, (links, sentence) in enumerate(zip(reference, sentences), start=1):
        n_source, n_target = len(words_of(sentence.src_pieces)), len(words_of(sentence.tgt_pieces))
        bad = [(i, j) for i, j in links if not (0 <= i < n_source and 0 <= j < n_target)]
        if bad:
            raise ValueError(f"reference line {number} links {bad[:3]}, outside its {n_source} source and "
                             f"{n_target} target words: the reference was made on other words")


def aligner_lines(sentences: Sequence[PieceSentence]) -> tuple[list[str], list[str]]:
    return ([" ".join(aligner_token(w) for w in words_of(s.src_pieces)) for s in sentences],
            [" ".join(aligner_token(w) for w in words_of(s.tgt_pieces)) for s in sentences])


def eflomal_reference(tokenizer: Tokenizer, sentences: Sequence[PieceSentence], extra: Sequence[ParallelCorpus],
                      evaluated: ParallelCorpus, max_len: int, symmetrization: str) -> tuple[list[Alignment], dict]:
    """eflomal's links for `sentences`, learnt from them and the `extra` corpora in both directions and symmetrized;
    and what the report says of them."""
    settings = EflomalSettings()
    version = eflomal_version()
    extra_sentences = [s for corpus in extra for s in piece_sentences(tokenizer, corpus.source, corpus.target, max_len)]
    source_lines, target_lines = aligner_lines([*extra_sentences, *sentences])
    tqdm.write(f"eflomal {version}: aligning {len(source_lines)} sentence pairs in both directions")
    forward, reverse = eflomal_links(source_lines, target_lines, settings)
    symmetrize = SYMMETRIZATIONS[symmetrization]
    reference = [symmetrize(f, r) for f, r in zip(forward[len(extra_sentences):], reverse[len(extra_sentences):])]
    described = {
        "what": "a statistical word aligner's output, not human annotation",
        "aligner": "eflomal", "version": version, "settings": asdict(settings),
        "trained_on": [os.path.relpath(path, REPOSITORY) for corpus in [*extra, evaluated]
                       for path in (corpus.source_file, corpus.target_file)],
        "sentence_pairs": len(source_lines),
        "symmetrization": symmetrization,
        "words": "our tokenizer's sentencepiece word groups (decoding/words.py), given to eflomal one token "
                 "per word with punctuation stripped from the ends; eflomal lowercases them",
    }
    check_reference(reference, sentences)
    return reference, described
