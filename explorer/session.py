"""The one way into the model: a checked request in, translations with their traces out (`run`), and every
later question a view asks about a result (`ModelService`): translate it again with a forced start or heads
switched off, score its output, read the step after a hypothesis, attribute it. Each runs on the device the
result was translated on, with the result's own strategy and settings. Views never touch a model themselves."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

from transformer import Translation
from transformer.analysis.attribution import Attribution
from transformer.analysis.causal import Patching, question_of
from transformer.analysis.causal.redecode import Cell, patched_translation
from transformer.analysis.contrastive import Contrast
from transformer.analysis.query_key import QueryKey
from transformer.analysis.registered import (  # noqa: F401
    ALTI_PLUS,
    ATTRIBUTION,
    CONTRAST,
    LENS,
    NORMS,
    PATCHING,
    QUERY_KEY,
    WALKTHROUGH,
)
from transformer.analysis.registry import (
    LOGIT_LENS,
    ModelAccess,
    add_analyses,
    add_analyses_batch,
    cheap_analyses,
    get_analysis,
    recorded_for,
    run_analysis,
)
from transformer.analysis.walkthrough import Walkthrough
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.hypothesis import HypothesisStep, hypothesis_step, output_log_prob
from transformer.decoding.strategies import get_strategy
from transformer.unicode_text import check_text

from .batching import BATCHED_STRATEGIES, BOUND_S, MAX_LINES, Batcher, batch_key
from .language import LanguageOffer, offer_for
from .registry import Registry
from .request import Request
from .result_cache import ResultCache, capacity_from_environment, request_key
from .translation_load import translating


@dataclass
class RunResult:
    model_key: str
    device: str
    strategy: str
    settings: dict  # the strategy's settings as used, and max_length
    translations: list[Translation]
    milliseconds: float
    notices: list[str] = field(default_factory=list)
    request: Request | None = None  # what was asked: later questions about the result reuse its settings
    rendered_views: set[str] = field(default_factory=set)  # the page's views drawn for this result so far
    draws: dict[str, int] = field(default_factory=dict)  # each view's latest draw begun (Wiring.render_named)
    from_cache: bool = False  # an equal request's result (result_cache.py), computed moments ago
    analysed: frozenset[str] = frozenset()  # the analyses its translations carry (`ModelService.complete` adds)
    offer: LanguageOffer | None = None  # the text looks like another served model's source language (language.py)

    @property
    def strategy_label(self) -> str:
        return get_strategy(self.strategy).label


# what a run adds to its translations besides the attention maps, for callers that read it (none of them ever
# changes a translation): the cheap analyses (transformer/analysis/registered.py), by name; the logit lens is
# recorded while decoding, ALTI+ and the norms take one teacher-forced pass over a batch's translations
ALTI = ALTI_PLUS  # LENS, ALTI and NORMS name them in `analyses`
EVERY_ANALYSIS = None  # every cheap analysis registered when the run starts


def run(registry: Registry, request: Request, analyses: frozenset[str] | None = EVERY_ANALYSIS) -> RunResult:
    """Translates a checked request (see request.py) with every attention map recorded and the `analyses` the
    caller reads (the page's views read them all)."""
    [result] = run_batch(registry, [request], analyses)
    return result


def run_batch(registry: Registry, requests: list[Request],
              analyses: frozenset[str] | None = EVERY_ANALYSIS) -> list[RunResult]:
    """Requests that differ only in their text (batching.batch_key), translated as `run` translates each, with all
    their lines decoded as one batch: one RunResult per request, with its own translations, analyses and notices.
    Each result's `milliseconds` is the batch's decoding time, which its visitor waited for."""
    analyses = cheap_analyses() if analyses is None else analyses
    first = requests[0]
    keys = {batch_key(request, analyses) for request in requests}
    if len(requests) > 1 and (len(keys) > 1 or None in keys):
        raise ValueError("requests decoded together must differ in their text only, with a strategy that batches "
                         f"({sorted(BATCHED_STRATEGIES)})")
    served = registry.get(first.model)
    translator, notice = served.on(first.device)
    lines = [line for request in requests for line in request.lines]
    started = time.perf_counter()
    try:
        translations = decode(translator, first, analyses, lines)
    except torch.cuda.OutOfMemoryError:
        if translator is served.translator:
            raise
        translator = served.translator
        notice = "CUDA ran out of memory for this request: translated on the CPU."
        translations = decode(translator, first, analyses, lines)
    elapsed = (time.perf_counter() - started) * 1000
    access = ModelAccess(translator.model, translator.tokenizer, tuple(first.heads_off))
    add_analyses_batch(access, translations, analyses)
    device = "cuda" if translator.model.device.type == "cuda" else "cpu"
    results, start = [], 0
    for request in requests:
        own = translations[start:start + len(request.lines)]
        start += len(own)
        notices = [notice] if notice else []
        cut = [i + 1 for i, t in enumerate(own) if t.truncated]
        if cut:
            notices.append(f"Line(s) {cut} exceeded the model's {translator.model.config.max_len - 1} source tokens: "
                           "only the first part was translated.")
        if any(t.tgt_tokens[-1:] == ["</s>"] and t.steps[-1].forced for t in own):
            notices.append("The forced prefix contains </s>: the translation ends there.")
        offer = offer_for(registry, request.model, "\n".join(request.lines))
        if offer is not None:
            notices.append(offer.notice(served.label))
        settings = {**request.settings, "max_length": request.max_length, "prefix": request.prefix,
                    **({"heads_off": own[0].settings.get("heads_off", [])} if request.heads_off else {}),
                    **{name: getattr(request, name) for name in ("source_lang", "target_lang")
                       if getattr(request, name)}}
        results.append(RunResult(request.model, device, request.strategy, settings, own, elapsed, notices, request,
                                 offer=offer, analysed=frozenset(analyses)))
    return results


def decode(translator, request: Request, analyses: frozenset[str], lines: list[str] | None = None) -> list[Translation]:
    """The request's lines (or `lines`, decoded with the request's settings) with every attention map recorded, and
    what the `analyses` need recorded while decoding (the logit lens); the same call decodes them again for an analysis
    asked later (`ModelService.complete`), so the output is the same."""
    recorded = recorded_for(analyses)
    probes = tuple(dict.fromkeys(ATTENTION_KINDS + tuple(name for name in recorded if name != LOGIT_LENS)))
    return translator.translate_batch(list(request.lines if lines is None else lines), strategy=request.strategy,
                                      max_length=request.max_length, record=probes, prefix=request.prefix,
                                      logit_lens=LOGIT_LENS in recorded, heads_off=list(request.heads_off) or None,
                                      source_lang=request.source_lang, target_lang=request.target_lang,
                                      **request.settings)


KEEP = object()  # rerun's default: the result's own heads switched off


class ModelService:
    """Runs requests and answers the views' questions about a result (see the module's docstring)."""

    def __init__(self, registry: Registry, cache: ResultCache | None = None, bound_s: float = BOUND_S,
                 admitted_lines: int = MAX_LINES):
        """`bound_s`: a request is refused (batching.Overloaded) when the work already waiting would take longer,
        unless fewer than `admitted_lines` lines wait."""
        self.registry = registry
        self.cache = ResultCache(capacity_from_environment()) if cache is None else cache
        self.pool = None  # worker processes that run requests (run_pool.RunPool); app.py starts them
        self.batcher = Batcher(self.run_batch, self.slots, bound_s=bound_s, admitted_lines=admitted_lines)

    def run(self, request: Request, analyses: frozenset[str] | None = EVERY_ANALYSIS) -> RunResult:
        """`request` translated, or an equal request's result: the same translations in a RunResult of its own.
        Decoded in a batch with the requests waiting beside it (batching.py); CUDA requests and models served in
        this process only run alone here, as they always did. Raises batching.Overloaded when too much waits."""
        analyses = cheap_analyses() if analyses is None else analyses

        def compute() -> RunResult:
            if request.device == "cuda" or self.registry.get(request.model).local:
                return run(self.registry, request, analyses)
            return self.batcher.run(request, analyses)

        with translating():  # a training run pauses while translations wait or run (translation_load.py)
            result, shared = self.cache.get_or_compute(request_key(request, analyses), compute)
        if not shared:
            return result
        return replace(result, request=request, notices=list(result.notices), rendered_views=set(), draws={},
                       from_cache=True)

    def run_batch(self, requests: list[Request], analyses: frozenset[str]) -> list[RunResult]:
        """One batch, in a worker process when they are ready, else here."""
        from_workers = None if self.pool is None else self.pool.run_batch(requests, analyses)
        return run_batch(self.registry, requests, analyses) if from_workers is None else from_workers

    def slots(self) -> int:
        """How many batches decode at once: one per worker process when they are ready, else one here."""
        pool = self.pool
        return pool.workers if pool is not None and pool.status == "ready" else 1

    def complete(self, result: RunResult, names) -> RunResult:
        """Adds to `result`'s translations the cheap analyses among `names` they do not carry yet: the page computes
        with a translation only what its first screen draws, and a tab's analyses when it is first drawn. The logit
        lens, made while decoding, comes from decoding the request again with it recorded (the same strategy, seed
        and settings, so the same output); the others run on the translations. An equal request's result shares the
        translations, so each is computed once for both."""
        if result is None:
            return result
        wanted = set(names) - result.analysed
        missing = frozenset(name for name in cheap_analyses() if name in wanted)
        if not missing:
            return result
        access = self.access(result)
        made_while_decoding = frozenset(name for name in missing if get_analysis(name).compute is None)
        if made_while_decoding:
            again = decode(self.translator_of(result), result.request, made_while_decoding)
            for translation, decoded in zip(result.translations, again):
                if decoded.tgt_ids != translation.tgt_ids:  # decoding is deterministic: a bug, never the visitor's
                    raise RuntimeError(f"decoding {translation.source!r} again gave another output")
                if LENS in made_while_decoding:
                    translation.logit_lens = decoded.logit_lens
        add_analyses_batch(access, result.translations, missing - made_while_decoding)
        result.analysed = result.analysed | missing
        return result

    def translator_of(self, result: RunResult):
        """The model that translated `result`, on the device it ran on."""
        translator, _ = self.registry.get(result.model_key).on(result.device)
        return translator

    def access(self, result: RunResult, heads_off=KEEP) -> ModelAccess:
        """What an analysis of `result` may use: its model on its device, with the result's heads switched off (or
        `heads_off`, (kind, layer, head) 0-based)."""
        translator = self.translator_of(result)
        heads = list(result.request.heads_off) if heads_off is KEEP else list(heads_off or [])
        return ModelAccess(translator.model, translator.tokenizer, tuple(heads))

    def analyse(self, result: RunResult, translation: Translation, name: str, **question):
        """The registered analysis `name` (transformer/analysis/registered.py) of one of `result`'s translations,
        with the result's heads switched off as it was translated; `question`: an on-demand analysis's arguments."""
        return run_analysis(self.access(result), translation, name, **question)

    def rerun(self, result: RunResult, translation: Translation, prefix=None, heads_off=KEEP) -> Translation:
        """`translation`'s source again with the result's strategy and settings, forced to start with `prefix`
        (pieces) and with `heads_off` ((kind, layer, head), 0-based) switched off instead of the result's own."""
        request = result.request
        access = self.access(result, heads_off)
        translator = self.translator_of(result)
        return add_analyses(access, translator.translate(
            translation.source, strategy=request.strategy, max_length=request.max_length, prefix=prefix,
            capture=True, heads_off=list(access.heads_off) or None, **request.settings), {NORMS})

    def output_log_prob(self, result: RunResult, translation: Translation, heads_off=()) -> float:
        """log p(translation's output | its source), teacher-forced, with `heads_off` switched off."""
        return output_log_prob(self.translator_of(result), translation.src_ids, translation.tgt_ids, heads_off)

    def step_after(self, result: RunResult, translation: Translation, prefix_ids: list[int]) -> HypothesisStep:
        """The candidates and cross-attention of the step after the target prefix `prefix_ids`."""
        return hypothesis_step(self.translator_of(result), translation.src_ids, prefix_ids)

    def pieces(self, result: RunResult, text: str) -> list[str]:
        """`text` in the result's target vocabulary (a typed what-if continuation)."""
        return self.translator_of(result).tokenizer.pieces(check_text("continuation", text))

    def contrast(self, result: RunResult, translation: Translation, step: int, foil: str) -> Contrast:
        """Why `translation` chose its piece at 1-based `step` and not the piece `foil` (analysis/contrastive.py)."""
        return self.analyse(result, translation, CONTRAST, step=step, foil=foil)

    def query_key(self, result: RunResult, translation: Translation, kind: str, layer: int, head: int,
                  query: int) -> QueryKey:
        """The query and key vectors behind one head's weights at one query position (all 0-based)."""
        return self.analyse(result, translation, QUERY_KEY, kind=kind, layer=layer, head=head, query=query)

    def walkthrough(self, result: RunResult, translation: Translation, token: int, step: int,
                    head: int = 0, layer: int = 0) -> Walkthrough:
        """Every operation of the forward pass for source position `token` and decoding step `step`, at every layer and
        head, its stages at `layer` and `head` (all 0-based), read from one teacher-forced pass with the result's heads
        switched off as it was translated."""
        return self.analyse(result, translation, WALKTHROUGH, token=token, step=step, head=head, layer=layer)

    def attribute(self, result: RunResult, translation: Translation) -> Attribution:
        """Input x gradient of the translation's own output over its source."""
        return self.analyse(result, translation, ATTRIBUTION)

    def patching(self, result: RunResult, translation: Translation, corrupted: str | None, target: int,
                 contrast: str | None, analyses, noise_word: int | None, noise_std: float) -> Patching:
        """What causes the piece `target` (from 1) of `translation`: activation patching against the corrupted
        sentence, or noise on its source piece `noise_word` (analysis/causal)."""
        return self.analyse(result, translation, PATCHING, corrupted=corrupted, target=target, contrast=contrast,
                            analyses=analyses, noise_word=noise_word, noise_std=noise_std)

    def held_translation(self, result: RunResult, translation: Translation, corrupted: str | None, target: int,
                         noise_word: int | None, noise_std: float, cell: Cell) -> str:
        """The corrupted source decoded again (greedy) with one cell (0-based) put back from the clean run."""
        access = self.access(result)
        question = question_of(access, translation, corrupted, target, None, noise_word, noise_std)
        with access.heads_masked():
            ids = patched_translation(access.model, question, cell, result.request.max_length)
        return access.tokenizer.decode(ids)
