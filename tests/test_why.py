"""Why this word: forced prefixes, the logit lens and the search tree, each against an independent computation."""
import math

import numpy as np
import pytest
import torch

from transformer.decoding.strategies import SettingError
from transformer.tokenizer import BOS_ID

SENTENCE = "a man rides a red bike near the water ."


def teacher_forced_probs(translator, src_ids, tgt_ids):
    """(T, V) next-token distributions of one full forward pass over the output, masked as decoding masks."""
    with torch.no_grad():
        logits = translator.model(torch.tensor([src_ids]), torch.tensor([[BOS_ID] + tgt_ids[:-1]]))[0].float()
    logits[:, [translator.model.config.pad_id, BOS_ID]] = float("-inf")
    return logits.softmax(-1)


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_a_forced_prefix_starts_the_output_and_keeps_the_model_probabilities(random_translator, strategy):
    prefix = "ein hund fährt"
    forced_ids = random_translator.tokenizer.encode(prefix)
    out = random_translator.translate(SENTENCE, strategy=strategy, prefix=prefix, max_length=24)
    assert out.tgt_ids[: len(forced_ids)] == forced_ids
    assert [s.forced for s in out.steps] == [True] * len(forced_ids) + [False] * (len(out.steps) - len(forced_ids))
    probs = teacher_forced_probs(random_translator, out.src_ids, out.tgt_ids)
    if strategy != "sample":  # sampling records its filtered distribution; with no filter it is the model's
        # the decoder's steps (cached, maybe our float16 kernel) against one teacher-forced pass: float32 rounding
        # through the layers on probabilities <= 1
        for t in range(len(forced_ids)):
            assert out.steps[t].prob == pytest.approx(float(probs[t, out.tgt_ids[t]]), abs=1e-5)
    assert out.settings["prefix"] == prefix


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_forcing_the_first_pieces_of_the_unforced_output_changes_nothing(random_translator, strategy):
    free = random_translator.translate(SENTENCE, strategy=strategy, max_length=10)
    for k in (1, 3):
        prefix = free.tgt_tokens[:k]  # pieces, exactly as the model produced them
        forced = random_translator.translate(SENTENCE, strategy=strategy, prefix=prefix, max_length=10)
        assert forced.tgt_ids == free.tgt_ids
        # the same steps on the same tokens; a forced step may take another batch shape: a few float32 ulps on
        # probabilities <= 1
        assert [s.prob for s in forced.steps] == pytest.approx([s.prob for s in free.steps], abs=1e-6)


def test_prefix_edge_cases(random_translator):
    free = random_translator.translate(SENTENCE, max_length=8)
    assert random_translator.translate(SENTENCE, prefix="", max_length=8).tgt_ids == free.tgt_ids  # empty: no forcing
    ended = random_translator.translate(SENTENCE, prefix="ein mann</s> ignored", max_length=8)
    assert ended.tgt_tokens[-1] == "</s>" and ended.text == "ein mann"
    with pytest.raises(SettingError, match="prefix is .* pieces long; the maximum output length is 3"):
        random_translator.translate(SENTENCE, prefix="ein mann fährt ein rot fahrrad", max_length=3)
    with pytest.raises(SettingError, match="prefix must be text or a list of pieces"):
        random_translator.translate(SENTENCE, prefix=42)
    with pytest.raises(SettingError, match=r"prefix pieces \['nonsense-piece'\] are not in the vocabulary"):
        random_translator.translate(SENTENCE, prefix=["nonsense-piece"])


def test_the_last_lens_layer_is_the_model_distribution(random_translator):
    out = random_translator.translate(SENTENCE, strategy="beam", beam_size=3, max_length=10, logit_lens=True)
    lens = out.logit_lens
    probs = teacher_forced_probs(random_translator, out.src_ids, out.tgt_ids)
    layers = random_translator.model.config.n_layers
    assert lens.chosen_prob.shape == (layers, len(out.tgt_ids))
    # the lens's pass against the test's own teacher-forced pass: float32 rounding on probabilities <= 1
    np.testing.assert_allclose(
        lens.chosen_prob[-1], probs[torch.arange(len(out.tgt_ids)), out.tgt_ids].numpy(), atol=1e-5
    )
    for t in range(len(out.tgt_ids)):
        top = probs[t].topk(5)
        assert [p for _, p in lens.topk[-1][t]] == pytest.approx(top.values.tolist(), abs=1e-5)
        assert lens.chosen_rank[-1, t] == int((probs[t] > probs[t, out.tgt_ids[t]]).sum()) + 1


def test_a_lens_row_is_the_model_cut_after_that_layer(random_translator):
    """Independent: run the decoder by hand through all but the last layer, then the final norm and projection."""
    model = random_translator.model
    out = random_translator.translate(SENTENCE, max_length=10, logit_lens=True)
    src, tgt = torch.tensor([out.src_ids]), torch.tensor([[BOS_ID] + out.tgt_ids[:-1]])
    with torch.no_grad():
        memory = model.encode(src)
        x = model.embed(tgt, model.tgt_embed)
        causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).tril()
        for layer in model.decoder_layers[:-1]:
            x = layer(x, memory, None, causal)
        logits = model.generator(model.decoder_norm(x))[0].float()
    logits[:, [model.config.pad_id, BOS_ID]] = float("-inf")
    expected = logits.softmax(-1)[torch.arange(len(out.tgt_ids)), out.tgt_ids].numpy()
    np.testing.assert_allclose(out.logit_lens.chosen_prob[-2], expected, atol=1e-5)  # float32 rounding, as above


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_the_tree_winning_path_is_the_translation(random_translator, strategy):
    settings = {"beam_size": 4} if strategy == "beam" else {}  # each strategy takes only its own settings
    out = random_translator.translate(SENTENCE, strategy=strategy, max_length=10, **settings)
    tree = out.tree
    assert [tree.nodes[i].token_id for i in tree.winner] == out.tgt_ids
    assert tree.path_to(tree.winner[-1]) == tree.winner
    assert [s.node for s in out.steps] == tree.winner
    for node in tree.nodes:
        parent = 0.0 if node.parent is None else tree.nodes[node.parent].score
        # a node's log-probability and score are Python floats (float64) made from each other: float64 rounding
        assert node.score == pytest.approx(parent + node.log_prob, abs=1e-6)
    for step, node_id in zip(out.steps, tree.winner):  # exp of a float32 log-probability: float32 rounding
        assert math.exp(tree.nodes[node_id].log_prob) == pytest.approx(step.prob, rel=1e-5)
