"""The analyses the explorer runs on a translation, by name, as plug-ins (like the views and the decoding
strategies): each declares what decoding must record for it, a function from (model access, translation) to a
typed result, and whether it is cheap (computed with every translation) or answered on demand. The session service
(explorer/session.py), the API and the views read this one table.

Adding an analysis is one file in `transformer/analysis/` that makes an `Analysis`, and one `register(...)` line in
`registered.py`:

    @dataclass
    class Entropy:
        per_head: np.ndarray  # (L, H)

    def entropy(access: ModelAccess, translation: Translation) -> Entropy: ...

    ANALYSIS = Analysis("entropy", "Mean attention entropy per head", Entropy, entropy)   # in entropy.py
    ENTROPY = register(entropy.ANALYSIS).name                                               # in registered.py

Translations decoded together (the server's batches) are analysed together (`add_analyses_batch`): an analysis that
declares a batch form, `compute_batch(access, translations)` -> one result per translation, equal to what `compute`
gives each, answers for all of them at once (ALTI+ in one padded pass); one without it runs one translation at a time.

Switched-off heads: every analysis runs inside `heads_masked(model, access.heads_off)` (`run_analysis`), so a
teacher-forced pass it makes sees the heads off as the translation was made, and none handles them itself. A
capture still records a masked head's weights; `core.head_mask.heads_masked_now` says which heads are off in the
running context, for an analysis that reads recorded weights as moving something (ALTI+ does).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..choices import checked_choice
from ..core.head_mask import heads_masked
from ..core.probes import PROBES
from ..decoding.trace import AnalysisResult, Translation

if TYPE_CHECKING:
    from ..core.head_ref import HeadRef
    from ..core.model import Transformer
    from ..tokenizer import Tokenizer

LOGIT_LENS = "logit_lens"  # what `records` names for the logit lens (decoding computes it from decoder_hidden)


@dataclass(frozen=True)
class ModelAccess:
    """What an analysis may use of the model that made a translation, on the device it ran on. `heads_off` are
    the heads switched off for it, (kind, layer, head) 0-based: `run_analysis` has already switched them off around
    the call; they are here to be read, not applied."""

    model: Transformer
    tokenizer: Tokenizer
    heads_off: tuple[HeadRef, ...] = ()

    def heads_masked(self):
        """The heads-off context, for work outside `run_analysis` (it yields the checked heads)."""
        return heads_masked(self.model, list(self.heads_off))


@dataclass(frozen=True)
class Analysis:
    name: str  # its key in Translation.analyses, in the API's JSON and in the session's `analyses` sets
    label: str  # what people read
    result: type  # the dataclass `compute` returns (or None, when the analysis does not apply to the model)
    # (access, translation, **question) -> result; a question is an on-demand analysis's own arguments (a step, a
    # head). None: decoding makes the result itself (`records` says what), nothing is computed afterwards
    compute: Callable[..., AnalysisResult | None] | None
    cheap: bool = True  # True: computed with every translation the page shows; False: asked for, on demand
    records: tuple[str, ...] = ()  # what decoding must record for it: probe names (core/probes.py) or LOGIT_LENS
    # (translation, result) -> a JSON-able dict for /translate_details' "analyses"; None: the analysis has no field
    # there (the built-in ones keep their own fields: "contributions", the attention's "norms")
    to_json: Callable[[Translation, Any], dict] | None = None
    description: str = ""
    # (access, translations) -> one result (or None) per translation, each what `compute` gives it, from fewer passes
    # (one padded batch): for translations decoded together (`add_analyses_batch`). None: computed one at a time
    compute_batch: Callable[[ModelAccess, list[Translation]], list[AnalysisResult | None]] | None = None


ANALYSES: dict[str, Analysis] = {}


def register(analysis: Analysis) -> Analysis:
    """Adds (or replaces) an analysis; refuses a result that is no dataclass or a record that is no probe."""
    if not (isinstance(analysis.result, type) and dataclasses.is_dataclass(analysis.result)):
        raise TypeError(f"analysis {analysis.name!r}: result must be a dataclass type, got {analysis.result!r}")
    unknown = [name for name in analysis.records if name != LOGIT_LENS and name not in PROBES]
    if unknown:
        raise ValueError(f"analysis {analysis.name!r} records {unknown}: each must be one of "
                         f"{[*PROBES, LOGIT_LENS]}")
    ANALYSES[analysis.name] = analysis
    return analysis


def unregister(name: str) -> None:
    ANALYSES.pop(name, None)


def get_analysis(name: str) -> Analysis:
    checked_choice("analysis", name, ANALYSES)
    return ANALYSES[name]


def cheap_analyses() -> frozenset[str]:
    """The names of every analysis computed with each translation, registered so far."""
    return frozenset(name for name, analysis in ANALYSES.items() if analysis.cheap)


def recorded_for(names) -> tuple[str, ...]:
    """What decoding must record for the analyses `names`, in registration order, each once."""
    wanted = [record for name in ANALYSES if name in names for record in ANALYSES[name].records]
    return tuple(dict.fromkeys(wanted))


def runnable(name: str) -> Analysis:
    """The analysis `name`, refused where it computes nothing (decoding makes it)."""
    analysis = get_analysis(name)
    if analysis.compute is None:
        raise ValueError(f"analysis {name!r} is made while decoding ({list(analysis.records)}); nothing to run")
    return analysis


def checked(analysis: Analysis, result: AnalysisResult | None) -> AnalysisResult | None:
    if result is not None and not isinstance(result, analysis.result):
        raise TypeError(f"analysis {analysis.name!r} returned {type(result).__name__}, not the "
                        f"{analysis.result.__name__} it declares")
    return result


def run_analysis(access: ModelAccess, translation: Translation, name: str, **question) -> AnalysisResult | None:
    """The analysis `name` of `translation`, with `access.heads_off` switched off around it (the one place heads
    are switched off for an analysis). Its result is checked against the type it declares."""
    analysis = runnable(name)
    with heads_masked(access.model, list(access.heads_off)):
        return checked(analysis, analysis.compute(access, translation, **question))


def run_analysis_batch(access: ModelAccess, translations: list[Translation], name: str) -> list[AnalysisResult | None]:
    """`run_analysis` of each of `translations` (made by one model with `access.heads_off`), through the analysis's
    batch form where it declares one, else one translation at a time."""
    analysis = runnable(name)
    if analysis.compute_batch is None:
        return [run_analysis(access, translation, name) for translation in translations]
    with heads_masked(access.model, list(access.heads_off)):
        results = analysis.compute_batch(access, translations)
    if len(results) != len(translations):
        raise RuntimeError(f"analysis {name!r} returned {len(results)} results for {len(translations)} translations")
    return [checked(analysis, result) for result in results]


def store(translation: Translation, name: str, result: AnalysisResult | None) -> None:
    """An analysis's result in `translation.analyses`; one that does not apply (None) leaves no entry."""
    if result is None:
        translation.analyses.pop(name, None)
    else:
        translation.analyses[name] = result


def add_analyses(access: ModelAccess, translation: Translation, names) -> Translation:
    """Fills `translation.analyses` with the cheap analyses among `names` that compute something, in registration
    order (an analysis may read one registered before it); an analysis that does not apply leaves no entry."""
    for name, analysis in list(ANALYSES.items()):
        if name in names and analysis.cheap and analysis.compute is not None:
            store(translation, name, run_analysis(access, translation, name))
    return translation


def add_analyses_batch(access: ModelAccess, translations: list[Translation], names) -> list[Translation]:
    """`add_analyses` for translations made together (one model, the same settings and heads switched off): each
    analysis, in registration order, runs over all of them at once where it declares a batch form (`compute_batch`),
    else one translation at a time; the results are those `add_analyses` gives each."""
    translations = list(translations)
    for name, analysis in list(ANALYSES.items()):
        if translations and name in names and analysis.cheap and analysis.compute is not None:
            for translation, result in zip(translations, run_analysis_batch(access, translations, name)):
                store(translation, name, result)
    return translations


__all__ = ["ANALYSES", "LOGIT_LENS", "Analysis", "AnalysisResult", "ModelAccess", "add_analyses", "add_analyses_batch",
           "cheap_analyses", "get_analysis", "recorded_for", "register", "run_analysis", "run_analysis_batch",
           "unregister"]
