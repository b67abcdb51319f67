"""The patching analyses (analysis/causal): their batched cells against one-cell forward passes written here with
plain module hooks, attribution patching against gradient x difference computed here, on tiny unequal stacks."""
import re

import numpy as np
import pytest
import torch

from transformer import Transformer
from transformer.analysis.causal import Question, aligned_positions, causal_patching, patching_json

from .conftest import tiny_config
from .test_patching import head_output, keep_memory, swap_head

CLEAN, CORRUPTED, TARGET = [3, 4, 5, 6, 2], [3, 7, 5, 6, 2], [5, 6, 7, 8]
STEP = 2  # the target piece: TARGET[2], after <s> 5 6
SHAPE = dict(encoder_layers=3, encoder_heads=4, decoder_layers=1, decoder_heads=2)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(3)
    return Transformer(tiny_config(12, **SHAPE)).eval()


@pytest.fixture(scope="module")
def result(model):
    return causal_patching(model, Question(CLEAN, CORRUPTED, TARGET, STEP, contrast_id=9))


def target_probability(model, src, hooks=()):
    """p of the target piece in one teacher-forced pass with `hooks` [(module, hook, pre)] attached."""
    handles = [m.register_forward_pre_hook(h) if pre else m.register_forward_hook(h) for m, h, pre in hooks]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([src]), torch.tensor([[2] + TARGET[:STEP]]))[0, -1]
    finally:
        for handle in handles:
            handle.remove()
    return float(logits.softmax(-1)[TARGET[STEP]]), logits


def grid(result, analysis, site):
    return next(g for g in result.grids + result.estimates if g.analysis == analysis and g.site == site)


def test_each_batched_cell_equals_its_own_forward_pass(model, result):
    p_clean, _ = target_probability(model, CLEAN)
    p_corrupted, _ = target_probability(model, CORRUPTED)
    assert (result.p_clean, result.p_corrupted) == pytest.approx((p_clean, p_corrupted), abs=1e-6)
    kept = {}
    layer = model.encoder_layers[1]
    target_probability(model, CLEAN, [(layer, lambda m, a, out: kept.setdefault("out", out.clone()), False)])

    def swap_position_1(module, args, output):
        output = output.clone()
        output[:, 1] = kept["out"][:, 1]
        return output

    p, _ = target_probability(model, CORRUPTED, [(layer, swap_position_1, False)])
    residual = grid(result, "trace", "residual").shares
    assert residual[1, 1] == pytest.approx((p - p_corrupted) / (p_clean - p_corrupted), abs=1e-4)
    assert residual.shape == (3, 5)

    layer = model.decoder_layers[0]  # cross-attention head 2 of 2, put back from the clean run
    handles = [keep_memory(model, kept), layer.cross_attention_residual.register_forward_pre_hook(
        lambda m, args: kept.__setitem__("x", args[0]))]
    target_probability(model, CLEAN)
    clean_head = head_output(layer.cross_attention, layer.cross_attention_residual.norm(kept["x"]), kept["memory"], 1)
    handles[1].remove()
    handles.append(swap_head(model, layer.cross_attention_residual, layer.cross_attention, 1, lambda own: clean_head,
                             kept))
    p, _ = target_probability(model, CORRUPTED)
    for handle in handles:
        handle.remove()
    heads = grid(result, "heads", "cross").shares
    assert heads.shape == (1, 2) and heads[0, 1] == pytest.approx((p - p_corrupted) / (p_clean - p_corrupted),
                                                                  abs=1e-4)
    assert grid(result, "heads", "encoder_self").shares.shape == (3, 4)
    assert [g.site for g in result.grids if g.analysis == "heads"] == ["cross", "encoder_self", "decoder_self"]
    assert np.allclose(grid(result, "heads", "decoder_self").shares, 0, atol=1e-5)  # it never sees the source


def test_attribution_patching_is_gradient_times_difference(model, result):
    outputs = {}
    layers = model.encoder_layers
    hooks = [(layer, lambda m, a, out, n=n: outputs.setdefault(("clean", n), out.detach().clone()), False)
             for n, layer in enumerate(layers)]
    target_probability(model, CLEAN, hooks)

    def keep(n):
        def hook(module, args, output):
            output.retain_grad()
            outputs[("corrupted", n)] = output
        return hook

    handles = [layer.register_forward_hook(keep(n)) for n, layer in enumerate(layers)]
    logits = model(torch.tensor([CORRUPTED]), torch.tensor([[2] + TARGET[:STEP]]))[0, -1]
    for handle in handles:
        handle.remove()
    logits.softmax(-1)[TARGET[STEP]].backward()
    model.zero_grad(set_to_none=True)
    gap = result.p_clean - result.p_corrupted
    want = np.stack([(outputs[("corrupted", n)].grad * (outputs[("clean", n)] - outputs[("corrupted", n)]))
                     .sum(-1)[0].detach().numpy() for n in range(3)]) / gap
    np.testing.assert_allclose(grid(result, "attribution", "residual").shares, want, atol=1e-5)
    assert -1 <= result.rank_correlation <= 1 and all(
        abs(d["exact"] - d["estimate"]) > 0.2 for d in result.disagreements)


def test_only_the_head_that_reads_the_source_restores_the_target():
    """A decoder whose only road to the source is cross-attention head 1: the other head's output weights are
    zero. Patching head 1 restores the target piece entirely, head 2 nothing; the same for its keys and values."""
    torch.manual_seed(4)
    model = Transformer(tiny_config(12, **SHAPE)).eval()
    with torch.no_grad():
        model.decoder_layers[0].cross_attention.out_proj.weight[:, 8:] = 0
    result = causal_patching(model, Question(CLEAN, CORRUPTED, TARGET, STEP), ("heads", "path"))
    p_clean, _ = target_probability(model, CLEAN)
    p_corrupted, _ = target_probability(model, CORRUPTED)
    assert abs(p_clean - p_corrupted) > 1e-3
    for analysis, site in (("heads", "cross"), ("path", "cross_keys_values")):
        np.testing.assert_allclose(grid(result, analysis, site).shares, [[1.0, 0.0]], atol=1e-4)


def test_positions_line_up_only_where_the_pieces_do(model):
    assert aligned_positions([3, 4, 5, 2], [3, 7, 5, 2]) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert aligned_positions([3, 4, 5, 2], [3, 7, 7, 5, 2]) == [(0, 0), (2, 3), (3, 4)]
    result = causal_patching(model, Question(CLEAN, [3, 7, 7, 5, 6, 2], TARGET, STEP), ("trace",))
    report = patching_json(result)
    assert report["unaligned_clean_positions"] == [2] and report["unaligned_corrupted_positions"] == [2, 3]
    assert [row[1] for row in report["analyses"]["trace"][0]["restored_share"]] == [None] * 3


@pytest.mark.parametrize("argv, message", [
    (["--target", "0"], "argument --target: must be"),
    (["--target", "1", "--analyses", "trace,everything"], "'everything'] not known; choose some of trace"),
    (["--target", "1", "--noise-word", "NaN"], "argument --noise-word: must be"),
    # the sentences refused as /patch refuses clean and corrupted (unicode_text.checked_lines)
    (["--target", "1", "--clean", ""], "argument --clean: is empty: type a sentence to translate."),
    (["--target", "1", "--clean", "  \n "], "argument --clean: is empty"),
    (["--target", "1", "--clean", "A dog runs.\nA cat sleeps."],
     "argument --clean: has 2 lines; the limit is one sentence on one line."),
    (["--target", "1", "--corrupted", "x" * 2001], "argument --corrupted: has 2,001 characters; the limit is 2,000"),
    (["--target", "1", "--clean", "A dog \udcff runs."], "argument --clean: is not valid Unicode text"),
])
def test_the_command_line_refuses_bad_settings_in_one_line(argv, message, capsys):
    from transformer.analysis.causal.cli import run

    with pytest.raises(SystemExit) as exit_status:
        run(["--model", "en-de", "--clean", "A dog runs.", "--corrupted", "A cat runs.", *argv])
    error = capsys.readouterr().err
    assert exit_status.value.code == 2 and message in error and len(error.strip().splitlines()) == 1, error


def test_the_saved_tab_opens_offline_and_keeps_markup_as_text(result):
    from explorer.figures.cause import heads_figure, trace_figure
    from explorer.standalone import cause_html

    trace = trace_figure([g for g in result.grids if g.analysis == "trace"], ["<b>", "a", "b", "c", "</s>"])
    heads = heads_figure([g for g in result.grids if g.analysis in ("heads", "path")])
    page = cause_html("“<script>alert(1)</script>” → “x”", [trace, heads], "rank correlation 0.9", {"model": "t"})
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert page.count("Plotly.newPlot") == 2 and not re.search(r"<(script|link)[^>]+(src|href)=", page)


def test_a_replacement_of_the_same_piece_count_is_the_nearest_word_piece():
    from transformer.analysis.causal import same_count_suggestions

    class Pieces:  # a tokenizer's id_to_piece over the tiny vocabulary
        table = ["<pad>", "<unk>", "<s>", "</s>", "▁cat", "▁dog", "s", "▁9", "ing", "▁bird", "▁a", "▁b"]

        def id_to_piece(self, index):
            return self.table[index]

    model = Transformer(tiny_config(12))
    with torch.no_grad():
        table = torch.zeros(12, 16)
        table[:, 0] = 1.0
        table[:, 1] = torch.arange(12.0)  # every piece a little further from ▁cat, by its id ...
        table[[5, 6, 7, 8], 1] = 4.1  # ... except the nearest ones, of which only ▁dog starts a word of letters
        model.src_embed.weight.copy_(table)
    assert same_count_suggestions(model, Pieces(), [4, 10, 3], 0, count=3) == ["▁dog", "▁bird", "▁a"]
    with pytest.raises(ValueError, match=r"replace_piece must be a source piece, in \[1, 2\], got 3"):
        same_count_suggestions(model, Pieces(), [4, 10, 3], 2)


def test_noise_on_one_piece_is_the_corrupted_run(model):
    """ROME's corruption: Gaussian noise (seeded, scaled) on one source piece's scaled embedding."""
    noise = torch.randn(1, 16, generator=torch.Generator().manual_seed(0)) * 2.0

    def noised(module, args, output):
        output = output.clone()
        output[:, 1] += noise[0]
        return output

    handle = model.src_embed.register_forward_hook(noised)
    p_noised, _ = target_probability(model, CLEAN)
    handle.remove()
    found = causal_patching(model, Question(CLEAN, CLEAN, TARGET, STEP, noise_positions=(1,), noise_scale=2.0),
                            ("trace",))
    assert found.p_corrupted == pytest.approx(p_noised, abs=1e-6) and found.p_clean != pytest.approx(p_noised)
