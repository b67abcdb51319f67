"""Head statistics recomputed by hand from the exported attention, and averaged over a split."""
import json

import numpy as np
import pytest

from transformer.analysis.corpus_stats import split_head_stats, stats_document
from transformer.analysis.head_stats import head_stats
from transformer.decoding.export import to_json

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
        assert stats.entropy == pytest.approx(entropy[stats.layer, stats.head], abs=1e-4)  # export rounds to 1e-6
        assert stats.max_weight == pytest.approx(confidence[stats.layer, stats.head], abs=1e-5)


def test_split_statistics_are_the_mean_over_sentences(random_translator):
    per_kind = split_head_stats(random_translator, SENTENCES, batch_size=2)
    translations = random_translator.translate_batch(SENTENCES, capture=True)
    for kind in ("encoder_self", "cross"):
        hand = np.mean([hand_entropy_and_confidence(t.recorded[kind].values, kind)[0] for t in translations], axis=0)
        for stats in per_kind[kind]:
            assert stats.sentences == len(SENTENCES)
            assert stats.entropy == pytest.approx(hand[stats.layer, stats.head], abs=1e-6)
    document = stats_document(per_kind, "val", len(SENTENCES), "cmd", 0.1)
    assert {(h["kind"], h["layer"], h["head"]) for h in document["heads"]} == {
        (kind, layer, head) for kind in ("encoder_self", "decoder_self", "cross") for layer in (1, 2, 3)
        for head in (1, 2, 3, 4)}  # numbered from 1
