"""The first screen's analyses over a batch (analysis/registry.py `add_analyses_batch`): ALTI+ and the norms of
translations decoded together come from one padded teacher-forced pass and equal each translation analysed alone, for
sources and outputs of different lengths and with heads switched off; padding contributes exactly 0; an analysis with
no batch form still runs, one translation at a time."""
import copy
import dataclasses
import shutil
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from explorer.registry import discover
from explorer.request import Request
from explorer.session import ALTI, NORMS, run_batch
from transformer import Tokenizer, Transformer, Translator
from transformer.analysis import registry as analyses
from transformer.analysis.alti import (
    ENCODER_STATES,
    Contributions,
    ForcedOutput,
    alti_rows,
    rollout,
    rollout_batch,
)
from transformer.analysis.forced_pass import batches
from transformer.analysis.registry import ANALYSES, Analysis, ModelAccess, add_analyses, add_analyses_batch
from transformer.checkpoint import save_checkpoint
from transformer.core.head_mask import heads_masked_now
from transformer.core.probes import ATTENTION_KINDS

from .conftest import FLOAT32_ROUNDING, tiny_config

# sources of different lengths, each decoded to its own length (max_length), so both sides of the batch are padded
LINES = (("a man rides a red bike in the park near the water .", 9), ("dog", 2),
         ("two girls play with a ball .", 5), ("the boy jumps", 12))
# what decoding recorded, which decides how ALTI+'s pass runs: the page's way (the decoder alone over the encoder
# states decoding recorded, with its weights), with the weights only, or nothing (the pass records its own weights)
RECORDINGS = {"states": ATTENTION_KINDS + ENCODER_STATES, "weights": ATTENTION_KINDS, "nothing": ()}
HEADS_OFF = {"all heads": (), "heads off": (("encoder_self", 0, 1), ("decoder_self", 2, 3), ("cross", 1, 0))}


def translations(translator, recorded, heads_off=()) -> list:
    return [translator.translate(text, max_length=length, record=recorded, heads_off=list(heads_off) or None)
            for text, length in LINES]


def assert_same(got, want, where: str = "result") -> None:
    """Every field equal: arrays in shape and dtype, their floats within FLOAT32_ROUNDING. The batch and a translation
    alone run torch's kernels on other shapes (padded), which may order float32 sums otherwise (tests/conftest.py)."""
    if dataclasses.is_dataclass(want):
        assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
        for field in dataclasses.fields(want):
            assert_same(getattr(got, field.name), getattr(want, field.name), f"{where}.{field.name}")
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), f"{where}: {list(got)} != {list(want)}"
        for key in want:
            assert_same(got[key], want[key], f"{where}[{key!r}]")
    else:
        assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype, where
        np.testing.assert_allclose(got, want, **FLOAT32_ROUNDING, err_msg=where)


@pytest.mark.parametrize("heads_off", HEADS_OFF.values(), ids=HEADS_OFF)
@pytest.mark.parametrize("recorded", RECORDINGS.values(), ids=RECORDINGS)
def test_alti_and_the_norms_of_a_batch_equal_each_translation_alone(random_translator, recorded, heads_off):
    """Every field of ALTI+'s result (the contributions after each layer, the source share, the norms) and the norms'
    result, from one padded pass, against each translation analysed alone: no padding at all (the computation alone
    is checked against loops over positions and heads in tests/test_alti.py)."""
    access = ModelAccess(random_translator.model, random_translator.tokenizer, heads_off)
    made = translations(random_translator, recorded, heads_off)
    assert len({len(t.src_ids) for t in made}) == len({len(t.tgt_ids) for t in made}) == len(LINES)
    alone = [add_analyses(access, copy.deepcopy(t), {ALTI, NORMS}) for t in made]
    batched = add_analyses_batch(access, made, {ALTI, NORMS})
    for number, (got, want) in enumerate(zip(batched, alone)):
        assert got.analyses.keys() == want.analyses.keys() == {ALTI, NORMS}
        source, target = len(got.src_ids), len(got.tgt_ids)
        assert got.contributions.layers.shape == (3, target, source + target)
        assert {kind: norms.shape[-1] for kind, norms in got.norms.items()} == {
            "encoder_self": source, "decoder_self": target, "cross": source}
        assert_same(got.analyses, want.analyses, f"line {number}")
        np.testing.assert_allclose(got.contributions.matrix.sum(1), 1, atol=1e-5)  # shares: float32 sums of ~1


def test_a_post_norm_model_gets_the_norms_of_a_batch_from_one_padded_pass(tokenizer_file, tmp_path, monkeypatch):
    """ALTI+ reads pre-norm layers: a post-norm model gets none, and the norms take a pass of their own, one for the
    whole batch."""
    torch.manual_seed(3)
    model = Transformer(tiny_config(Tokenizer.load(tokenizer_file).vocab_size, norm="post", d_model=32))
    translator = Translator.from_pretrained(save_checkpoint(tmp_path / "post", model, tokenizer_file))
    access = ModelAccess(translator.model, translator.tokenizer, (("cross", 0, 2),))
    made = translations(translator, ATTENTION_KINDS, access.heads_off)
    alone = [add_analyses(access, copy.deepcopy(t), {ALTI, NORMS}) for t in made]
    passes = []
    layers_pass = translator.model.layers_pass
    monkeypatch.setattr(translator.model, "layers_pass", lambda *a: passes.append(a[0].shape) or layers_pass(*a))
    batched = add_analyses_batch(access, made, {ALTI, NORMS})
    assert passes == [(len(LINES), max(len(t.src_ids) for t in made))]
    for got, want in zip(batched, alone):
        assert got.contributions is None and got.analyses.keys() == {NORMS}
        assert_same(got.analyses, want.analyses)


def test_the_page_s_analyses_of_a_batch_take_one_pass_of_the_decoder(random_translator, monkeypatch):
    """The page records the encoder states and the weights: ALTI+ runs the decoder once over the batch, no encoder,
    and the norms come from that pass."""
    model = random_translator.model
    made = translations(random_translator, RECORDINGS["states"])
    passes = []
    decoder = model.decoder_layers_output
    monkeypatch.setattr(model, "decoder_layers_output", lambda *a: passes.append(a[2].shape) or decoder(*a))
    monkeypatch.setattr(model, "encode", lambda *a, **k: pytest.fail("the encoder ran again"))
    add_analyses_batch(ModelAccess(model, random_translator.tokenizer), made, {ALTI, NORMS})
    assert passes == [(len(LINES), max(len(t.tgt_ids) for t in made))]
    assert all(t.norms is t.contributions.norms for t in made)


def test_translations_with_other_recordings_take_passes_apart_with_the_same_numbers(random_translator, monkeypatch):
    """A pass reads decoding's recordings for all its outputs or for none: translations recorded otherwise (the page's
    and a capture's) are split into one pass each, and each still equals its translation alone."""
    model = random_translator.model
    access = ModelAccess(model, random_translator.tokenizer)
    made = [t for recorded in (RECORDINGS["states"], RECORDINGS["weights"])
            for t in translations(random_translator, recorded)[:2]]
    alone = [add_analyses(access, copy.deepcopy(t), {ALTI, NORMS}) for t in made]
    passes = []
    decoder = model.decoder_layers_output
    monkeypatch.setattr(model, "decoder_layers_output", lambda *a: passes.append(a[2].size(0)) or decoder(*a))
    for number, (got, want) in enumerate(zip(add_analyses_batch(access, made, {ALTI, NORMS}), alone)):
        assert_same(got.analyses, want.analyses, f"translation {number}")
    assert passes == [2, 2]


def test_long_outputs_are_split_into_passes_within_the_memory_budget():
    outputs = [ForcedOutput(list(range(3, 3 + source)), list(range(4, 4 + target)))
               for source, target in ((4, 3), (30, 28), (9, 12), (5, 5), (31, 2))]
    width, budget = 16, 16 * 2 * 31 * 31

    def size(group):  # the largest (B, Q, K, D) terms tensor of the group's padded pass
        source = max(len(outputs[i].src_ids) for i in group)
        target = max(len(outputs[i].tgt_ids) for i in group)
        return len(group) * max(source * source, target * target, target * (1 + source)) * width

    groups = batches(outputs, width, budget)
    assert sorted(i for group in groups for i in group) == list(range(len(outputs)))
    assert groups[0] == [1, 4]  # the longest first, two of them within the budget
    assert all(size(group) <= budget for group in groups) and len(groups) == 2
    assert batches(outputs, width, 1) == [[1], [4], [2], [3], [0]]  # one output a pass, never split


@pytest.mark.parametrize("heads_off", HEADS_OFF.values(), ids=HEADS_OFF)
def test_padded_positions_contribute_exactly_zero(random_translator, heads_off):
    """Rows over [source positions, decoder inputs], padded to the batch's longest: a row never draws on a padded
    position, nor on a decoder input after its own, in the encoder's rollout and after every decoder layer; each
    output's own Rollout (what alti_logit reads) equals its rollout alone."""
    model = random_translator.model
    outputs = [ForcedOutput([9, 14, 22, 7, 3], [17, 5, 3]), ForcedOutput([40, 3], [8, 12, 30, 6, 11, 3]),
               ForcedOutput([5, 6, 7, 8, 9, 10, 11, 3], [21])]
    traced = rollout_batch(model, outputs, list(heads_off), torch.float32)
    source, target = traced.from_source.size(1), max(traced.passed.targets)
    assert (source, target) == (8, 6)
    for index, output in enumerate(outputs):
        own_source, own_target = len(output.src_ids), len(output.tgt_ids)
        assert traced.from_source[index, :own_source, own_source:].count_nonzero() == 0
        for rows in traced.before + traced.after:
            rows = rows[index, :own_target]  # (T, S + T), the output's own predictions
            assert rows[:, own_source:source].count_nonzero() == 0  # padded source positions
            assert rows[:, source:].triu(1).count_nonzero() == 0  # later decoder inputs, padded ones included
            assert rows[:, source + own_target:].count_nonzero() == 0
            np.testing.assert_allclose(rows.sum(1).numpy(), 1, atol=1e-5)
        alone = rollout(model, output.src_ids, output.tgt_ids, list(heads_off), torch.float32)
        for name in ("from_source", "before", "after"):
            assert_same_tensors(getattr(traced.output(index), name), getattr(alone, name), f"output {index}: {name}")


def assert_same_tensors(got, want, where):
    if isinstance(want, list):
        for number, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same_tensors(a, b, f"{where}[{number}]")
    else:
        assert got.shape == want.shape, where
        np.testing.assert_allclose(got.numpy(), want.numpy(), **FLOAT32_ROUNDING, err_msg=where)


def test_a_key_the_query_does_not_read_gets_exactly_zero_before_the_rows_are_normalised():
    torch.manual_seed(0)
    y, terms = torch.randn(3, 8), torch.randn(3, 4, 8) * 0.3
    padded = torch.cat([terms, torch.randn(3, 2, 8)], dim=1)  # two more keys, whose terms are not even 0
    real = torch.tensor([True] * 4 + [False] * 2)
    rows = alti_rows(y, padded, real[None, :])
    assert rows[:, 4:].count_nonzero() == 0
    np.testing.assert_allclose(rows[:, :4].numpy(), alti_rows(y, terms).numpy(), **FLOAT32_ROUNDING)


@dataclass
class SourceShareMean:
    value: float  # the mean over predictions of ALTI+'s source share
    heads_off: list  # the heads switched off while it ran


@pytest.fixture
def plug_in():
    """A cheap analysis added as a plug-in with no batch form, reading ALTI+'s result (registered before it)."""
    calls = []

    def compute(access, translation):
        calls.append(translation)
        return SourceShareMean(float(translation.contributions.source_share.mean()),
                               heads_masked_now(access.model))

    analyses.register(Analysis("source share mean", "Mean source share", SourceShareMean, compute))
    try:
        yield calls
    finally:
        analyses.unregister("source share mean")


def test_an_analysis_without_a_batch_form_runs_one_translation_at_a_time_in_the_batch_path(random_translator,
                                                                                           plug_in):
    heads_off = HEADS_OFF["heads off"]
    access = ModelAccess(random_translator.model, random_translator.tokenizer, heads_off)
    made = translations(random_translator, RECORDINGS["states"], heads_off)
    add_analyses_batch(access, made, {ALTI, "source share mean"})
    assert list(map(id, plug_in)) == list(map(id, made))  # each translation once, after ALTI+ ran for all
    for translation in made:
        result = translation.analyses["source share mean"]
        assert result.value == pytest.approx(float(translation.contributions.source_share.mean()))
        assert sorted(result.heads_off) == sorted(heads_off)  # switched off around it as around any analysis
        assert NORMS not in translation.analyses  # not asked for


def test_a_batch_form_answers_for_the_whole_batch_the_session_decodes(random_translator, tmp_path, monkeypatch):
    """`session.run_batch` hands every line of every request to the batch form at once, never to `compute`; one
    that answers for another number of translations is an error, not a silent mismatch."""
    shutil.copytree(random_translator.source, tmp_path / "tiny")
    registry = discover(tmp_path)
    texts = ("a man rides a red bike .", "dog\nthe boy jumps")
    requests = [Request.from_api(registry, text, "tiny", strategy="greedy", max_length=8) for text in texts]
    batches = []
    alti = ANALYSES[ALTI]

    def counted(access, translations):
        batches.append(len(translations))
        return alti.compute_batch(access, translations)

    monkeypatch.setitem(ANALYSES, ALTI, dataclasses.replace(alti, compute_batch=counted,
                                                            compute=lambda *a: pytest.fail("computed alone")))
    results = run_batch(registry, requests, frozenset({ALTI, NORMS}))
    assert batches == [3]
    assert all(isinstance(t.contributions, Contributions) and t.norms is not None
               for result in results for t in result.translations)
    monkeypatch.setitem(ANALYSES, ALTI, dataclasses.replace(alti, compute_batch=lambda access, translations: []))
    with pytest.raises(RuntimeError, match="0 results for 3 translations"):
        run_batch(registry, requests, frozenset({ALTI, NORMS}))
