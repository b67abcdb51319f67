"""The tokenizer of a converted Hugging Face model (convert.py): its tokenizer.json run by the `tokenizers` library,
which is what Hugging Face runs, and the special tokens each family puts around a sentence.

    family            source ids                               target: the decoder starts with
    m2m_100 (NLLB)    [src_lang] pieces </s>                   decoder_start, then [tgt_lang] forced
      NLLB legacy     pieces </s> [src_lang]
    mbart (mBART-50)  [src_lang] pieces </s>                   decoder_start, then [tgt_lang] forced
      mBART (cc25)    pieces </s> [src_lang]                   [tgt_lang] as the decoder's start
    t5                (task prefix) pieces </s>                decoder_start (<pad>)
    bart              <s> pieces </s>                          decoder_start (</s>), then forced_bos if set

M2M100 saved without a tokenizer.json (transformers 5 keeps its sentencepiece.bpe.model and vocab.json) is read by
spm_vocabulary.py, which offers the same calls. The special tokens are added here rather than by tokenizer.json's
post-processor, which transformers rewrites per
source language at run time. Decoding drops every special token, as `decode(ids, skip_special_tokens=True)` does.
Same interface as tokenizer.Tokenizer, so a converted model decodes, records and analyses like ours.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer as RustTokenizer

from .choices import ChoiceError
from .spm_vocabulary import SPM_FILE, VOCAB_FILE, SentencePieceVocabulary
from .unicode_text import check_text

TOKENIZER_JSON = "tokenizer.json"


class LanguageError(ChoiceError):
    """A language code the model does not have; `name` is the setting, and the message names the codes it has."""


class HubTokenizer:
    def __init__(self, tokenizer: RustTokenizer | SentencePieceVocabulary, settings: dict):
        self.tokenizer = tokenizer
        self.settings = settings
        self.pad_id, self.unk_id, self.eos_id = settings["pad_id"], settings["unk_id"], settings["eos_id"]
        self.bos_id = settings["decoder_start_id"]  # the decoder's first input
        self.languages: dict[str, int] = settings.get("languages", {})  # code -> id
        self.default_source, self.default_target = settings.get("source_lang"), settings.get("target_lang")
        self.source_layout = settings["source_layout"]  # "prefix" ([lang] ... </s>), "suffix" (... </s> [lang]),
        # "plain" (... </s>) or "bos" (<s> ... </s>)
        self.forced_first = settings.get("forced_first")  # "target_lang", an id, or None
        self.task_prefix = settings.get("task_prefix", "")  # T5's "translate English to German: "
        added = tokenizer.get_added_tokens_decoder()
        self.special_ids = frozenset(i for i, token in added.items() if token.special)

    @classmethod
    def load(cls, directory, settings: dict) -> "HubTokenizer":
        """tokenizer.json, or M2M100's sentencepiece.bpe.model and vocab.json where settings name them."""
        if settings.get("language_codes"):
            return cls(SentencePieceVocabulary.from_folder(directory, settings["language_codes"]), settings)
        path = Path(directory) / TOKENIZER_JSON
        if not path.is_file():
            raise FileNotFoundError(f"{path}: tokenizer file is missing")
        try:
            tokenizer = RustTokenizer.from_file(str(path))
        except Exception as error:  # noqa: BLE001  the library's own parse errors, of several kinds
            raise ValueError(f"{path}: not a tokenizer the tokenizers library reads "
                             f"({(str(error).splitlines() or [''])[0]})") from None
        return cls(tokenizer, settings)

    @property
    def files(self) -> tuple[str, ...]:
        return (SPM_FILE, VOCAB_FILE) if self.settings.get("language_codes") else (TOKENIZER_JSON,)

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary: its embedding rows, which may outnumber tokenizer.json's tokens (NLLB pads)."""
        return self.settings.get("vocab_size") or self.tokenizer.get_vocab_size(with_added_tokens=True)

    def language_id(self, setting: str, code: str | None) -> int | None:
        """The id of language `code` (None: the model's default for `setting`); a LanguageError names `setting`."""
        if not self.languages:
            if code is not None:
                raise LanguageError(setting, f"{setting}: this model has no language codes; leave it out")
            return None
        code = code if code is not None else (self.default_source if setting == "source_lang"
                                              else self.default_target)
        if code not in self.languages:
            shown = ", ".join(sorted(self.languages)[:8])
            raise LanguageError(setting, f"{setting}: unknown language code {code!r}; this model has "
                                         f"{len(self.languages)} ({shown}, ...)")
        return self.languages[code]

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode(self, text: str, source_lang: str | None = None) -> list[int]:
        """Source text -> ids, with what comes before the pieces, without what ends them (`source_end`)."""
        ids = self._ids(self.task_prefix + check_text("text", text))
        if self.source_layout == "prefix":
            return [self.language_id("source_lang", source_lang), *ids]
        if self.source_layout == "bos":
            return [self.settings["bos_token_id"], *ids]
        return ids

    def source_end(self, source_lang: str | None = None) -> list[int]:
        """What ends a source: </s>, and the language code after it in the "suffix" layout."""
        if self.source_layout == "suffix":
            return [self.eos_id, self.language_id("source_lang", source_lang)]
        return [self.eos_id]

    def forced_start(self, target_lang: str | None = None) -> list[int]:
        """The ids every translation starts with after the decoder's start token: the target language's code, or
        BART's forced_bos_token_id, or nothing."""
        if self.forced_first == "target_lang":
            return [self.language_id("target_lang", target_lang)]
        if isinstance(self.forced_first, int):
            return [self.forced_first]
        return []

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def encode_target(self, text: str) -> list[int]:
        return self._ids(check_text("text", text))

    def encode_target_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode_target(text) for text in texts]

    def pieces(self, text: str) -> list[str]:
        return self.tokenizer.encode(check_text("text", text), add_special_tokens=False).tokens

    @cached_property
    def piece_table(self) -> list[str]:
        table = [""] * self.vocab_size
        for piece, token_id in self.tokenizer.get_vocab(with_added_tokens=True).items():
            if 0 <= token_id < len(table):
                table[token_id] = piece
        return table

    def id_to_piece(self, token_id: int) -> str:
        token_id = int(token_id)
        return self.piece_table[token_id] if 0 <= token_id < len(self.piece_table) else "<unk>"

    def piece_to_id(self, piece: str) -> int:
        found = self.tokenizer.token_to_id(piece)
        return self.unk_id if found is None else found

    def decode(self, ids) -> str:
        """Target ids -> text, the special tokens dropped, as `decode(ids, skip_special_tokens=True)`; an id past
        tokenizer.json's tokens (NLLB has 2 more embedding rows than tokens) has no text."""
        known = self.tokenizer.get_vocab_size(with_added_tokens=True)
        return self.tokenizer.decode([int(i) for i in ids if int(i) < known], skip_special_tokens=True).strip()
