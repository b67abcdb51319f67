"""Which language a visitor typed: German typed into the English → German model is offered German → English in
one click, instead of being translated into nonsense without a word. Nothing ever switches on its own.

The identifier is py3langid (a maintained fork of langid.py: a naive Bayes model over byte n-grams, made for short
texts such as tweets), limited to the languages the served models translate from, with its probabilities
normalised over them. `bench/bench_language.py` measures it on Tatoeba's test pairs (docs/views.md#language).
Its model takes about a second to load, so servers warm it up (`warm_up`) before the first request needs it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from .registry import LANGUAGE_NAMES, Registry

# a guess below this is no reason to speak up: one-word inputs ("Hallo", "OK", names) score 0.33-0.7; at 0.9, no
# false offer in Tatoeba's 5,002 test sentences, and 99.1% of the other side's offered (docs/views.md#language)
MIN_PROBABILITY = 0.9


@dataclass(frozen=True)
class LanguageOffer:
    """The text looks like `language` (with `probability`), which the chosen model does not translate from, and
    `model` does."""
    language: str  # an ISO 639-1 code, as the checkpoints' configs name languages
    probability: float
    model: str  # the served model to offer
    model_label: str

    @property
    def language_name(self) -> str:
        return LANGUAGE_NAMES.get(self.language, self.language)

    def notice(self, chosen_label: str) -> str:
        return (f"This text looks {self.language_name} ({self.probability:.0%} sure), which {chosen_label} does not "
                f"translate from: {self.model_label} does.")

    def to_json(self) -> dict:
        return {"language": self.language, "probability": round(self.probability, 4), "model": self.model,
                "model_label": self.model_label}


@functools.cache
def identifier(languages: tuple[str, ...] | None = None):
    """py3langid's identifier, over `languages` only (None: every language it knows)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # a second to load: only where it is used

    found = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if languages is not None:
        found.set_languages(list(languages))
    return found


def source_languages(registry: Registry) -> tuple[str, ...]:
    """The languages the served models translate from that the identifier knows (not NLLB's eng_Latn, say), in a
    fixed order; a playground model's toy task (its "languages" are the task's name) is none."""
    named = {language for key, served in registry.models.items()
             if (language := registry.source_language(key)) and "playground" not in served.translator.config}
    if len(named) < 2:  # nothing to choose between: the identifier is not loaded
        return tuple(named)
    return tuple(sorted(named & set(identifier().nb_classes)))


def warm_up(registry: Registry) -> None:
    """Loads the identifier now rather than on the first request (servers and worker processes call this)."""
    languages = source_languages(registry)
    if len(languages) > 1:
        identifier(languages).classify("warm up")


def detect(text: str, languages: tuple[str, ...]) -> tuple[str, float]:
    """The most probable of `languages` for `text`, and its probability among them."""
    language, probability = identifier(languages).classify(text)
    return language, float(probability)


def offer_for(registry: Registry, model_key: str, text: str) -> LanguageOffer | None:
    """An offer where `text` is confidently in another language than `model_key`'s source, and a served model
    translates from that language (one translating into the chosen model's source language first)."""
    languages = source_languages(registry)
    chosen = registry.source_language(model_key)
    if chosen is None or len(languages) < 2 or chosen not in languages:
        return None
    language, probability = detect(text, languages)
    if language == chosen or probability < MIN_PROBABILITY:
        return None
    candidates = [key for key in registry.models if registry.source_language(key) == language]
    back = [key for key in candidates if registry.get(key).translator.config.get("languages", {}).get("tgt") == chosen]
    model = (back or candidates)[0]
    return LanguageOffer(language, probability, model, registry.get(model).label)
