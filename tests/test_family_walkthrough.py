"""The walk-through shows each family's own operations: for a converted tiny T5 v1.1 (hub_fixtures.py) its norms are
RMS norms, its self-attention scores are q · k plus the stack's relative bias with no 1/sqrt(d_k) (checked against
Hugging Face's own position bias), its feed-forward is gated; for NLLB the positions are fairseq's sinusoids from the
table's row 2, and for BART the embedding norm is named."""
import pytest
import torch

pytest.importorskip("transformers")

from explorer.profile import DISTANCES_SHOWN, profile_model  # noqa: E402
from explorer.views.positional import PositionalView  # noqa: E402
from transformer.analysis.walkthrough import walkthrough  # noqa: E402

from .hub_fixtures import SENTENCES, Pair  # noqa: E402


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("hub")


def walk_of(pair, step: int = 2):
    translation = pair.ours.translate(SENTENCES[0], strategy="greedy", max_length=6)
    return translation, walkthrough(pair.ours.model, pair.ours.tokenizer, translation, token=1, step=step, head=1)


def stage(walk, key: str):
    return next(s for s in walk.stages if s.key == key)


def test_t5_walks_through_rms_norms_relative_scores_and_a_gated_feed_forward(root):
    pair = Pair("flan-t5", root)
    translation, walk = walk_of(pair)
    norm = stage(walk, "encoder.encoder_self.norm")
    assert norm.title.endswith("RMS norm") and "mean(x²)" in norm.formula
    scores = stage(walk, "encoder.encoder_self.scores")
    assert "b_h(bucket(j − i))" in scores.formula and "√d_k" not in scores.formula
    assert "√d_k" not in stage(walk, "decoder.cross.scores").formula
    assert "W_gate" in stage(walk, "encoder.encoder_ff.hidden").formula
    assert stage(walk, "encoder.positions").title.endswith("no positional vector")
    # the scores shown: Hugging Face's q · k plus its own position bias, for the walk's token, head and layer 0
    hf = pair.model.encoder.block[0].layer[0]
    with torch.no_grad():
        x = hf.layer_norm(pair.model.shared(torch.tensor([translation.src_ids])))
        q, k = (projection(x).view(1, len(translation.src_ids), -1, 10).transpose(1, 2)
                for projection in (hf.SelfAttention.q, hf.SelfAttention.k))
        bias = hf.SelfAttention.compute_bias(len(translation.src_ids), len(translation.src_ids))
        expected = (q @ k.transpose(-1, -2) + bias)[0, 1, 1]
    shown = next(n for n in scores.numbers if n.name == "scores").values
    assert torch.tensor(shown).float() == pytest.approx(expected.numpy(), abs=1e-4)


def test_nllb_walks_through_fairseq_sinusoids_and_bart_through_its_embedding_norm(root):
    nllb = Pair("nllb", root)
    _, walk = walk_of(nllb)
    positions = stage(walk, "encoder.positions")
    assert "fairseq" in positions.text and "(p − 1 + 2)" in positions.formula
    table = nllb.model.model.encoder.embed_positions.weights  # Hugging Face's own table, the first token at row 2
    shown = next(n for n in positions.numbers if n.name == "positions").values
    assert torch.tensor(shown).float() == pytest.approx(table[2 + 1].numpy(), abs=1e-6)  # token 1 (0-based)
    bart = Pair("bart", root)
    _, walk = walk_of(bart)
    assert "LN(e × scale + PE)" in stage(walk, "encoder.input").formula


def test_the_positional_tab_draws_t5s_relative_bias_as_hugging_face_computes_it(root):
    pair = Pair("t5", root)
    profile = profile_model(pair.ours)
    attention = pair.model.encoder.block[0].layer[0].SelfAttention
    with torch.no_grad():  # Hugging Face's bias of a query at DISTANCES_SHOWN over keys 0..2 DISTANCES_SHOWN
        expected = attention.compute_bias(2 * DISTANCES_SHOWN + 1, 2 * DISTANCES_SHOWN + 1)[0, :, DISTANCES_SHOWN]
    assert profile.relative_bias["encoder"] == pytest.approx(expected.numpy(), abs=1e-6)
    figure = PositionalView.relative(profile.relative_bias)["encoding_plot"]
    assert "relative position bias" in figure.layout.title.text.replace("<br>", " ")
    assert list(figure.data[0].x) == list(range(-DISTANCES_SHOWN, DISTANCES_SHOWN + 1))
