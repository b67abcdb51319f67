"""M2M100's tokenizer as transformers 5 saves it, without a tokenizer.json: sentencepiece.bpe.model cuts the text,
vocab.json maps pieces to ids (fairseq's: <s> 0, <pad> 1, </s> 2, <unk> 3, then the pieces), and each language's
code, `__en__`, takes the id after the vocabulary in the order of its language list (M2M100Tokenizer's
`lang_token_to_id`: len(vocab.json) + i). Offers the part of the `tokenizers` library's Tokenizer that HubTokenizer
reads, so a converted M2M100 decodes like any other family (tests/test_hub_families.py holds the ids equal to
Hugging Face's M2M100Tokenizer)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

SPM_FILE, VOCAB_FILE = "sentencepiece.bpe.model", "vocab.json"
# M2M100Tokenizer's language lists (its `language_codes` setting), in the order their ids follow the vocabulary
LANGUAGE_LISTS = {
    "m2m100": ("af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi "
               "hr ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns "
               "oc or pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh "
               "zu").split(),
    "wmt21": "en ha is ja cs ru zh de".split(),
}


@dataclass(frozen=True)
class Encoding:
    ids: list[int]
    tokens: list[str]


@dataclass(frozen=True)
class AddedToken:
    content: str
    special: bool = True


class SentencePieceVocabulary:
    def __init__(self, processor: spm.SentencePieceProcessor, vocabulary: dict[str, int], languages: list[str],
                 unk: str = "<unk>"):
        self.processor, self.vocabulary = processor, dict(vocabulary)
        self.unk_id = vocabulary[unk]
        self.added = {len(vocabulary) + i: AddedToken(f"__{code}__") for i, code in enumerate(languages)}
        self.added |= {vocabulary[t]: AddedToken(t) for t in ("<s>", "<pad>", "</s>", "<unk>") if t in vocabulary}
        self.all = self.vocabulary | {token.content: i for i, token in self.added.items()}
        self.pieces = {i: piece for piece, i in self.all.items()}

    @classmethod
    def from_folder(cls, folder, language_codes: str) -> "SentencePieceVocabulary":
        folder = Path(folder)
        for name in (SPM_FILE, VOCAB_FILE):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder / name}: tokenizer file is missing (an M2M100 folder without a "
                                        f"tokenizer.json needs {SPM_FILE} and {VOCAB_FILE})")
        if language_codes not in LANGUAGE_LISTS:
            raise ValueError(f"{folder}: unknown language_codes {language_codes!r}; M2M100's are "
                             f"{sorted(LANGUAGE_LISTS)}")
        try:
            vocabulary = json.loads((folder / VOCAB_FILE).read_text(encoding="utf-8"))
            processor = spm.SentencePieceProcessor(model_file=str(folder / SPM_FILE))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RuntimeError) as error:
            raise ValueError(f"{folder}: unreadable tokenizer files ({error})") from None
        if not isinstance(vocabulary, dict) or "<unk>" not in vocabulary:
            raise ValueError(f"{folder / VOCAB_FILE}: expected a JSON object of piece -> id with <unk>")
        return cls(processor, vocabulary, LANGUAGE_LISTS[language_codes])

    def encode(self, text: str, add_special_tokens: bool = False) -> Encoding:
        tokens = self.processor.encode(text, out_type=str)
        return Encoding([self.vocabulary.get(token, self.unk_id) for token in tokens], tokens)

    def get_added_tokens_decoder(self) -> dict[int, AddedToken]:
        return dict(self.added)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return len(self.all) if with_added_tokens else len(self.vocabulary)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        return dict(self.all if with_added_tokens else self.vocabulary)

    def token_to_id(self, token: str) -> int | None:
        return self.all.get(token)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """The pieces joined by SentencePiece; the special tokens and language codes dropped."""
        return self.processor.decode([self.pieces[i] for i in ids if i in self.pieces and i not in self.added])
