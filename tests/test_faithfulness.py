"""The deletion test (analysis/faithfulness.py): its batched curve against single forward passes written here,
AOPC against its definition, and the command's table on a tiny model."""
import json

import numpy as np
import pytest
import torch

from transformer.analysis.faithfulness import METHODS, aopc, deletion_curve, main, method_scores
from transformer.tokenizer import BOS_ID, UNK_ID


def one_by_one(model, src_ids, tgt_ids, scores, steps):
    """(steps + 1, T) by one teacher-forced pass per (k, t), deleting by hand."""
    curve = np.zeros((steps + 1, len(tgt_ids)))
    for t, target in enumerate(tgt_ids):
        ranked = sorted(range(len(src_ids) - 1), key=lambda s: (-scores[t, s], s))  # </s> stays
        for k in range(steps + 1):
            source = [UNK_ID if s in ranked[:k] else piece for s, piece in enumerate(src_ids)]
            with torch.no_grad():
                logits = model(torch.tensor([source]), torch.tensor([[BOS_ID] + tgt_ids[:-1]]))[0, t]
            curve[k, t] = logits.log_softmax(-1)[target].item()
    return curve


def test_the_batched_curve_is_one_pass_per_deletion(random_translator):
    translation = random_translator.translate("a b c d e", capture=True, max_length=6)
    scores = np.random.default_rng(1).random((len(translation.tgt_ids), len(translation.src_ids)))
    batched = deletion_curve(random_translator.model, translation.src_ids, translation.tgt_ids, scores, 3)
    expected = one_by_one(random_translator.model, translation.src_ids, translation.tgt_ids, scores, 3)
    # a batch of deletions against one pass each: other shapes, other float32 sums, on log-probabilities of order 5
    np.testing.assert_allclose(batched, expected, atol=1e-4)


def test_aopc_is_the_mean_drop():
    assert aopc(np.array([-1.0, -1.5, -2.0, -4.0])) == pytest.approx((0.5 + 1.0 + 3.0) / 3)  # float64 rounding


def test_every_method_scores_every_output_and_source_piece(random_translator):
    translation = random_translator.translate("a b c", capture=True, max_length=5)
    scores = method_scores(random_translator.model, translation, (1, 2), np.random.default_rng(0))
    assert list(scores) == list(METHODS)
    for method, values in scores.items():
        assert values.shape == (len(translation.tgt_ids), len(translation.src_ids)), method
    np.testing.assert_allclose(scores[METHODS[0]], translation.recorded["cross"].values[1, 2])  # the same array read


def test_the_command_writes_a_table_with_every_method(random_translator, corpus_dir, tmp_path, capsys):
    out = tmp_path / "faithfulness.json"
    main(["--checkpoint", str(random_translator.source), "--data-dir", str(corpus_dir), "--limit", "3",
          "--steps", "2", "--out", str(out)])
    data = json.loads(out.read_text())
    assert [row["method"] for row in data["table"]] == list(METHODS) and data["sentences"] == 3
    for row in data["table"]:
        # the table rounds curves and AOPC to 4 decimals: the mean of rounded points is within 1e-4 of the rounded mean
        assert len(row["curve"]) == 3 and row["aopc"] == pytest.approx(aopc(np.array(row["curve"])), abs=1e-3)
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(random_translator.source), "--data-dir", str(corpus_dir), "--steps", "0"])
    assert "argument --steps: must be at least 1" in capsys.readouterr().err
