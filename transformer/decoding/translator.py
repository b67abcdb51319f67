"""Text in, trace out: tokenizer + model + a registered decoding strategy."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from ..checkpoint import (
    METRICS_FILE,
    TOKENIZER_FILE,
    CheckpointError,
    checkpoint_folder,
    load_checkpoint,
    read_metrics,
    save_checkpoint,
)
from ..choices import ChoiceError, type_phrase
from ..core.head_mask import HeadMaskError, check_heads_off, heads_masked
from ..core.model import Transformer
from ..core.probes import ATTENTION_KINDS, check_probe_names
from ..tokenizer import Tokenizer
from ..unicode_text import check_text
from .decoded import DecodedSentence
from .logit_lens import logit_lens
from .strategies import SettingError, build_settings, get_strategy
from .trace import Step, Translation, label_recorded, labelled_tree, path_tree


def check_device(device: str) -> torch.device:
    if not isinstance(device, (str, torch.device)):
        raise ChoiceError("device", f"device must be a string such as 'cpu' or 'cuda', got {type_phrase(device)}")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but CUDA is not available here; use device='cpu'")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {str(device)!r}")
    return device


class LanguageSettingError(SettingError):
    """A language a model does not have, or one given to a model of one direction; `name` is the setting."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


class Translator:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, config: dict | None = None,
                 source: Path | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config or {"model": model.config.to_dict()}
        self.source = source  # the folder it was loaded from, for metrics and the tokenizer file

    @classmethod
    def from_pretrained(cls, directory, device: str = "cpu") -> "Translator":
        """From a checkpoint folder, or a shipped checkpoint by name ("en-de", "de-en")."""
        model, tokenizer, config = load_checkpoint(directory, check_device(device))
        if model.device.type == "cpu":
            model.use_half_weights(True)  # the same numbers in half the bytes per decoding step (core/half_linear.py)
        return cls(model, tokenizer, config, checkpoint_folder(directory))

    @property
    def metrics(self) -> dict | None:
        return read_metrics(self.source) if self.source else None

    @property
    def languages(self) -> dict:
        """{"src": ..., "tgt": ...}; checkpoints from before languages were recorded are En→De."""
        return self.config.get("languages", {"src": "en", "tgt": "de"})

    def recorded_decoding(self, strategy: str | None = None) -> tuple[str, dict]:
        """`strategy` (default: the one metrics.json records, else beam) with each of its settings as metrics.json
        records it, else the strategy's default: how this checkpoint was tuned on val to decode."""
        recorded = (self.metrics or {}).get("decoding", {})
        if not isinstance(recorded, dict):
            raise CheckpointError(f"{self.source / METRICS_FILE}: 'decoding' must be an object of a strategy and its "
                                  f"settings, got {recorded!r}")
        strategy = recorded.get("strategy", "beam") if strategy in (None, "") else strategy  # {} is no strategy
        if strategy != recorded.get("strategy"):
            recorded = {}
        return strategy, {spec.name: recorded.get(spec.name, spec.default) for spec in get_strategy(strategy).specs}

    def save_pretrained(self, directory, metrics: dict | None = None, dtype: torch.dtype = torch.float32) -> Path:
        if metrics is None and self.source and (self.source / METRICS_FILE).is_file():
            metrics = self.metrics
        extra = {k: v for k, v in self.config.items() if k != "model"}
        return save_checkpoint(directory, self.model, self._tokenizer_files(), extra, metrics, dtype)

    def _tokenizer_files(self) -> Path | list[Path]:
        if self.source is None:
            raise ValueError("this Translator was not loaded from a folder; save with checkpoint.save_checkpoint")
        files = [self.source / name for name in self.tokenizer.files]
        return files[0] if files == [self.source / TOKENIZER_FILE] else files

    def source_ids(self, text: str, source_lang: str | None = None) -> tuple[list[int], bool]:
        """Ids ending with EOS (and, in some multilingual models, the language code after it), cut to fit the
        model's positions; and whether it was cut. `source_lang`: a multilingual model's source language."""
        if hasattr(self.tokenizer, "source_end"):  # a converted family's: its language code, its own ending
            ids, end = self.tokenizer.encode(text, source_lang), self.tokenizer.source_end(source_lang)
        else:
            ids, end = self.tokenizer.encode(text), [self.tokenizer.eos_id]
        room = self.model.config.max_len - len(end)
        return ids[:room] + end, len(ids) > room

    def language_start(self, source_lang: str | None, target_lang: str | None) -> list[int]:
        """The ids a translation starts with before any prefix (a multilingual model's target language code),
        checking both languages; a model without languages takes neither."""
        if not hasattr(self.tokenizer, "forced_start"):
            for name, value in (("source_lang", source_lang), ("target_lang", target_lang)):
                if value is not None:
                    raise LanguageSettingError(name, f"{name}: this model translates one direction only; leave it out")
            return []
        try:
            self.tokenizer.language_id("source_lang", source_lang)
            return self.tokenizer.forced_start(target_lang)
        except ChoiceError as error:  # the tokenizer's LanguageError, which names its setting
            raise LanguageSettingError(error.name, str(error)) from None

    def translate(self, text: str, **settings) -> Translation:
        return self.translate_batch([check_text("text", text)], **settings)[0]

    def prefix_ids(self, prefix: str | list[str] | None, max_length: int | None) -> list[int]:
        """The ids a forced prefix stands for: text is tokenized, a list is taken as pieces exactly as they
        are (the what-if of a candidate piece); a `</s>` ends the translation there."""
        if prefix is None or (isinstance(prefix, (str, list, tuple)) and len(prefix) == 0):
            return []
        if isinstance(prefix, str):
            before, ends, _ = check_text("prefix", prefix).partition("</s>")
            ids = self.tokenizer.encode_target(before) + ([self.tokenizer.eos_id] if ends else [])
        elif isinstance(prefix, (list, tuple)) and all(isinstance(p, str) for p in prefix):
            ids = [self.tokenizer.piece_to_id(check_text("prefix", p)) for p in prefix]
            unknown = [p for p, i in zip(prefix, ids) if self.tokenizer.id_to_piece(i) != p]
            if unknown:
                raise SettingError(f"prefix pieces {unknown} are not in the vocabulary")
            if self.tokenizer.eos_id in ids:
                ids = ids[: ids.index(self.tokenizer.eos_id) + 1]
        else:
            raise SettingError(f"prefix must be text or a list of pieces, got {prefix!r}")
        if self.tokenizer.unk_id in ids:
            raise SettingError(f"prefix {prefix!r} has characters the tokenizer cannot express")
        limit = min(max_length or self.model.config.max_len, self.model.config.max_len)
        if len(ids) > limit:
            raise SettingError(f"prefix is {len(ids)} pieces long; the maximum output length is {limit}")
        return ids

    def translate_batch(self, texts: list[str], strategy: str = "greedy", max_length: int | None = None,
                        capture: bool = False, record=None, prefix: str | None = None, logit_lens: bool = False,
                        heads_off=None, source_lang: str | None = None, target_lang: str | None = None,
                        **settings) -> list[Translation]:
        """Decodes every text with a registered strategy (see decoding/strategies). `settings` are that
        strategy's settings by name (beam_size=4, temperature=0.7, ...); `capture=True` records the three
        attention kinds, `record` any probes the model declares (Transformer.PROBES) by name. `prefix` forces
        the translation to start with that text's pieces; `logit_lens=True` adds `Translation.logit_lens`.
        `heads_off`, a list of (kind, layer, head), 0-based, switches those heads off while decoding (head
        masking, see core/head_mask.py); given, it is kept in `Translation.settings["heads_off"]`. `source_lang` and
        `target_lang`: a multilingual model's languages by code (default: the direction it was converted for)."""
        chosen = get_strategy(strategy)
        strategy_settings = build_settings(strategy, settings)
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise SettingError(f"max_length must be a positive integer or None, got {max_length!r}")
        probes = check_probe_names(record if record is not None else (ATTENTION_KINDS if capture else ()))
        if logit_lens and "decoder_hidden" not in probes:
            probes += ("decoder_hidden",)
        for name, value in (("source_lang", source_lang), ("target_lang", target_lang)):
            if value is not None:
                check_text(name, value)
        forced = self.language_start(source_lang, target_lang) + self.prefix_ids(prefix, max_length)
        try:
            masked = check_heads_off(self.model, heads_off)
        except HeadMaskError as error:
            raise SettingError(str(error)) from None
        if not texts:
            return []
        for number, text in enumerate(texts):
            check_text(f"texts[{number}]", text)
        encoded = [self.source_ids(text, source_lang) for text in texts]
        options = {"prefixes": [forced] * len(texts)} if forced else {}
        with heads_masked(self.model, masked):
            decoded = chosen.decode(self.model, [ids for ids, _ in encoded], strategy_settings, max_length, probes,
                                    **options)
        used = {**asdict(strategy_settings), "max_length": max_length, "prefix": prefix or ""}
        if source_lang is not None or target_lang is not None:
            used.update(source_lang=source_lang, target_lang=target_lang)
        if heads_off is not None:
            used["heads_off"] = masked
        return [self._result(text, ids, truncated, out, strategy, used, logit_lens)
                for text, (ids, truncated), out in zip(texts, encoded, decoded)]

    def _result(self, source: str, src_ids: list[int], truncated: bool, out: DecodedSentence, strategy: str,
                settings: dict, with_lens: bool) -> Translation:
        piece = self.tokenizer.id_to_piece
        tree = labelled_tree(out.tree, out.winner, piece) if out.tree is not None else path_tree(out.steps, piece)
        steps = [
            Step(
                piece(s.token_id),
                s.token_id,
                s.prob,
                [(piece(i), p) for i, p in s.topk],
                None
                if s.hypotheses is None
                else [(" ".join(piece(i) for i in ids), score) for ids, score in s.hypotheses],
                tree.winner[t] if t < len(tree.winner) else None,
                s.forced,
            )
            for t, s in enumerate(out.steps)
        ]
        src_tokens, tgt_tokens = [piece(i) for i in src_ids], [piece(i) for i in out.token_ids]
        return Translation(
            source=source,
            text=self.tokenizer.decode(out.token_ids),
            src_tokens=src_tokens,
            tgt_tokens=tgt_tokens,
            src_ids=src_ids,
            tgt_ids=out.token_ids,
            steps=steps,
            score=out.score,
            truncated=truncated,
            strategy=strategy,
            settings=settings,
            recorded=label_recorded(out.recorded, src_tokens, tgt_tokens),
            tree=tree,
            logit_lens=logit_lens(self.model, out.recorded["decoder_hidden"], out.token_ids, piece)
            if with_lens
            else None,
        )
