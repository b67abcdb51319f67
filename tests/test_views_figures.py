"""Figures and views against independent computations on a real (random-weight) translation."""
import csv
import html
import io
import json

import numpy as np
import pytest

from explorer import figures
from explorer.views.selection import select_heads
from transformer.decoding.export import attention_csv, steps_csv, to_json
from transformer.decoding.words import merge_to_words, word_groups


@pytest.fixture(scope="module")
def translation(random_translator):
    return random_translator.translate("a man rides a red bike near the water .", strategy="beam", beam_size=3,
                                       max_length=12, capture=True)


def escaped(tokens):
    return [html.escape(t, quote=False) for t in tokens]  # "</s>" must show as text, not markup


def visible(axis_label):
    """Independent of the code under test: drop the zero-width characters that keep labels unique."""
    return axis_label.replace("\u200b", "").replace("\u200c", "")


def heatmap_trace(figure):
    return next(t for t in figure.data if t.type == "heatmap")


def test_every_recorded_map_carries_the_labels_the_model_saw(translation):
    recorded = translation.recorded
    assert recorded["decoder_self"].rows == translation.tgt_tokens
    assert recorded["decoder_self"].cols == ["<s>"] + translation.tgt_tokens[:-1]  # keys are the decoder inputs
    assert (recorded["cross"].rows, recorded["cross"].cols) == (translation.tgt_tokens, translation.src_tokens)
    assert recorded["encoder_self"].rows == recorded["encoder_self"].cols == translation.src_tokens
    for item in recorded.values():  # the labels fit the array they label
        assert item.values.shape[-2:] == (len(item.rows), len(item.cols))


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_heatmap_shows_the_recorded_weights_with_token_labels(translation, kind):
    weights = getattr(translation.attention, kind)
    rows, cols = translation.recorded[kind].rows, translation.recorded[kind].cols
    figure = figures.attention_heatmap(select_heads(weights, 1, "2"), rows, cols, "t")
    trace = heatmap_trace(figure)
    # figures round what they send to 4 decimals (explorer/figures/theme.py DECIMALS): 5e-5 on weights <= 1
    np.testing.assert_allclose(np.asarray(trace.z, dtype=np.float32), weights[1, 2], atol=1e-4)
    assert [visible(x) for x in trace.x] == escaped(cols) and [visible(y) for y in trace.y] == escaped(rows)
    assert len(set(trace.x)) == len(cols)  # repeated tokens stay separate columns
    assert figure.layout.yaxis.autorange == "reversed"  # first query on top
    assert "query %{y}" in trace.hovertemplate and "key %{x}" in trace.hovertemplate


def test_mean_over_heads(translation):
    cross = translation.attention.cross
    # a mean against a sum divided, in float32: a few ulps on weights <= 1
    np.testing.assert_allclose(select_heads(cross, 0, "mean"), cross[0].sum(axis=0) / cross.shape[1], atol=1e-6)


def test_tiled_heatmap_places_every_head(translation):
    weights = translation.attention.encoder_self
    heads = weights.shape[1]
    figure = figures.tiled_heatmap(list(weights[2]), [f"head {h + 1}" for h in range(heads)], 2,
                                   translation.src_tokens, translation.src_tokens, "t")
    z = np.asarray(heatmap_trace(figure).z, dtype=np.float32)
    n = len(translation.src_tokens)
    for h in range(heads):
        top, left = (h // 2) * (n + 1), (h % 2) * (n + 1)
        np.testing.assert_allclose(z[top : top + n, left : left + n], weights[2, h], atol=1e-4)  # 4 decimals
    assert np.isnan(z[:, n]).all()  # the gap column between tiles
    x = [visible(label) for label in heatmap_trace(figure).x]
    assert (
        x[:n] == escaped(translation.src_tokens)
        and x[n] == ""
        and x[n + 1 : 2 * n + 1] == escaped(translation.src_tokens)
    )
    assert [a.text for a in figure.layout.annotations] == [f"head {h + 1}" for h in range(heads)]


def test_word_groups_follow_sentencepiece_word_starts():
    pieces = ["▁Ein", "▁Fahr", "rad", "fahr", "er", ".", "</s>"]
    assert word_groups(pieces) == [[0], [1, 2, 3, 4, 5], [6]]


def test_merging_pieces_into_words():
    rng = np.random.default_rng(0)
    weights = rng.random((4, 5))
    weights /= weights.sum(axis=1, keepdims=True)
    rows, cols = ["▁a", "b", "▁c", "</s>"], ["<s>", "▁x", "y", "z", "▁w"]
    merged, row_words, col_words = merge_to_words(weights, rows, cols)
    assert row_words == ["ab", "c", "</s>"] and col_words == ["<s>", "xyz", "w"]
    expected_first = [(weights[0, 0] + weights[1, 0]) / 2, (weights[0, 1:4].sum() + weights[1, 1:4].sum()) / 2,
                      (weights[0, 4] + weights[1, 4]) / 2]
    # float64 sums in another order: assert_allclose's default 1e-7 relative is ample
    np.testing.assert_allclose(merged[0], expected_first)
    np.testing.assert_allclose(merged.sum(axis=1), 1.0)


def test_candidates_bar_marks_the_chosen_token(translation):
    step = translation.steps[0]
    figure = figures.candidates_bar(step.topk, step.token, "t")
    bar = figure.data[0]
    assert list(bar.x) == pytest.approx([round(p, 4) for _, p in step.topk])  # the same rounding to 4 decimals
    chosen = [i for i, label in enumerate(figure.layout.yaxis.ticktext) if "chosen" in label]
    assert [step.topk[i][0] for i in chosen] == [step.token]


def test_labels_are_escaped_not_rendered():
    figure = figures.attention_heatmap(np.eye(2), ["<b>x</b>", "&"], ["<script>", "y"], "t")
    assert [visible(x) for x in figure.data[0].x] == ["&lt;script&gt;", "y"]
    assert [visible(y) for y in figure.data[0].y] == ["&lt;b&gt;x&lt;/b&gt;", "&amp;"]


def test_json_export_round_trips_the_attention(translation):
    data = json.loads(to_json([translation]))["sentences"][0]
    assert data["tgt_tokens"] == translation.tgt_tokens and data["src_ids"] == translation.src_ids
    # the export rounds to 6 decimals: 5e-7 on weights <= 1
    np.testing.assert_allclose(np.array(data["attention"]["cross"]["weights"]), translation.attention.cross, atol=1e-6)
    assert [s["token"] for s in data["steps"]] == translation.tgt_tokens


def test_csv_exports_hold_one_row_per_weight_and_candidate(translation):
    rows = list(csv.DictReader(io.StringIO(attention_csv([translation]))))
    expected = sum(getattr(translation.attention, k).size for k in ("encoder_self", "decoder_self", "cross"))
    assert len(rows) == expected
    # numbered from 1 as the app numbers them: layer 2, head 1, query 3 is array index [1, 0, 2]
    cross = [r for r in rows if r["kind"] == "cross" and r["layer"] == "2" and r["head"] == "1" and r["query"] == "3"]
    np.testing.assert_allclose([float(r["weight"]) for r in cross], translation.attention.cross[1, 0, 2],
                               atol=1e-6)  # the CSV rounds to 6 decimals, as the JSON
    assert [int(r["key"]) for r in cross] == list(range(1, len(translation.src_tokens) + 1))
    assert [r["key_token"] for r in cross] == translation.src_tokens
    step_rows = list(csv.DictReader(io.StringIO(steps_csv([translation]))))
    assert len(step_rows) == sum(len(s.topk) for s in translation.steps)


def test_positional_figures(random_translator):
    table = random_translator.model.positions.table.numpy()
    heatmap = figures.encoding_heatmap(table[:20], "t")
    np.testing.assert_allclose(np.asarray(heatmap.data[0].z, dtype=np.float32), table[:20], atol=1e-4)  # 4 decimals
    # dot products of order 10, rounded to 4 decimals, after float32 products summed in another order
    similarity = figures.position_similarity(table[:10], "t")
    np.testing.assert_allclose(np.asarray(similarity.data[0].z, dtype=np.float32), table[:10] @ table[:10].T, atol=1e-3)
    curves = figures.encoding_curves(table, [0, 3], "t")
    assert [t.name for t in curves.data] == ["dim 0 (sin)", "dim 3 (cos)"]


def test_titles_show_markup_as_text():
    figure = figures.attention_heatmap(np.eye(2), ["a", "b"], ["<s>", "b"], "keys: <s> then the rest",
                                       "query", "key: decoder input (<s>, then the tokens fed back)")
    assert figure.layout.title.text == "keys: &lt;s&gt; then the rest"
    assert figure.layout.xaxis.title.text == "key: decoder input (&lt;s&gt;, then the tokens fed back)"
