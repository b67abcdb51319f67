"""Head statistics recomputed by hand from the exported attention, and averaged over a split."""
import json

import numpy as np
import pytest

from transformer.analysis.corpus_stats import split_head_stats, stats_document
from transformer.analysis.head_stats import head_stats
from transformer.decoding.export import to_json

from .conftest import FLOAT32_ROUNDING

SENTENCES = ["a man rides a red bike .", "two dogs run near the water .", "a girl plays with a ball in the park ."]


def hand_entropy_and_confidence(weights: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Per head, from nested lists as exported: mean over informative rows of -sum p log p, and of max p."""
    weights = np.asarray(weights, dtype=np.float64)  # (L, H, rows, cols)
    rows = range(weights.shape[2])
    if kind == "decoder_self" and weights.shape[2] > 1:
        rows = range(1, weights.shape[2])  # the first row can only see <s>: it says nothing about the head
    entropy = np.zeros(weights.shape[:2])
    confidence = np.zeros(weights.shape[:2])
    for layer in range(weights.shape[0]):
        for head in range(weights.shape[1]):
            per_row = []
            for r in rows:
                p = weights[layer, head, r]
                per_row.append(-sum(x * np.log(x) for x in p if x > 0))
            entropy[layer, head] = np.mean(per_row)
            confidence[layer, head] = np.mean([weights[layer, head, r].max() for r in rows])
    return entropy, confidence


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_statistics_equal_a_recomputation_from_the_export(random_translator, kind):
    translation = random_translator.translate(SENTENCES[0], capture=True, max_length=10)
    exported = json.loads(to_json([translation]))["sentences"][0]["attention"][kind]["weights"]
    entropy, confidence = hand_entropy_and_confidence(exported, kind)
    for stats in head_stats(translation.recorded[kind]):
        # the export rounds weights to 1e-6: -p log p moves by up to ~1e-5 per tiny weight; the largest weight by 5e-7
        assert stats.entropy == pytest.approx(entropy[stats.layer, stats.head], abs=1e-4)
        assert stats.max_weight == pytest.approx(confidence[stats.layer, stats.head], abs=1e-5)


def test_split_statistics_are_the_mean_over_sentences(random_translator):
    per_kind = split_head_stats(random_translator, SENTENCES, batch_size=2)
    translations = random_translator.translate_batch(SENTENCES, capture=True)
    for kind in ("encoder_self", "cross"):
        hand = np.mean([hand_entropy_and_confidence(t.recorded[kind].values, kind)[0] for t in translations], axis=0)
        for stats in per_kind[kind]:
            assert stats.sentences == len(SENTENCES)
            # batches of 2 against one batch of 3: other padding, other float32 sums through torch's kernels, so
            # entropies of order 1 agree to float32 rounding (FLOAT32_ROUNDING), not to a few ulps
            assert stats.entropy == pytest.approx(hand[stats.layer, stats.head], rel=FLOAT32_ROUNDING["rtol"],
                                                  abs=FLOAT32_ROUNDING["atol"])
    document = stats_document(per_kind, "val", len(SENTENCES), "cmd", 0.1)
    assert {(h["kind"], h["layer"], h["head"]) for h in document["heads"]} == {
        (kind, layer, head) for kind in ("encoder_self", "decoder_self", "cross") for layer in (1, 2, 3)
        for head in (1, 2, 3, 4)}  # numbered from 1


def test_the_heads_view_draws_the_checkpoint_reports(tmp_path):
    import shutil

    from explorer.registry import discover
    from explorer.shell import build_demo
    from explorer.views import MODEL
    from transformer.analysis.importance import HeadImportance, PruningPoint, result_json

    from .conftest import SHIPPED

    folder = tmp_path / "en-de"
    shutil.copytree(SHIPPED, folder)
    config = json.loads((SHIPPED / "config.json").read_text())
    layers, n_heads = config["model"]["n_layers"], config["model"]["n_heads"]
    heads = [(kind, layer, head) for kind in ("encoder_self", "decoder_self", "cross") for layer in range(layers)
             for head in range(n_heads)]
    drops = {h: round(0.1 * i - 1.0, 2) for i, h in enumerate(heads)}
    importances = [HeadImportance(h, 30.0 - drops[h], -1.5, drops[h], 0.01 * i) for i, h in enumerate(heads)]
    curve = [PruningPoint(k, None if k == 0 else heads[k - 1], 30.0 - k) for k in range(len(heads) + 1)]
    (folder / "head_importance.json").write_text(json.dumps(result_json({"bleu": 30.0, "log_likelihood": -1.5},
                                                                        importances, curve)))
    _, ui = build_demo(discover(tmp_path))
    figure = ui.render_named([ui.view("heads")], None, ui.default_state(), "en-de", MODEL)["head_importance"]
    z = np.asarray(figure.data[0].z, dtype=np.float64)
    for (kind, layer, head), drop in drops.items():  # row per (kind, layer), a blank row between kinds
        row = ("encoder_self", "decoder_self", "cross").index(kind) * (layers + 1) + layer
        assert z[row, head] == pytest.approx(drop, abs=1e-4)  # the figure rounds to 4 decimals
