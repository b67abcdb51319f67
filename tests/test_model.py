import re

import pytest
import torch

from transformer import ModelConfig, Transformer, expected_parameter_count
from transformer.checkpoint import WEIGHTS_FILE, load_weights, save_checkpoint

from .conftest import tiny_config

SEED_NOTEBOOK = dict(src_vocab_size=6, tgt_vocab_size=6, d_model=8, n_heads=8, n_layers=6, d_ff=16, dropout=0.1,
                     max_len=10, norm="pre", final_norm=True, pos_encoding="sinusoidal", share_embeddings=False,
                     tie_output=False, pad_id=0)


def test_seed_notebook_configuration_has_9206_parameters():
    assert Transformer(ModelConfig(**SEED_NOTEBOOK)).num_parameters() == 9206


@pytest.mark.parametrize("overrides", [
    {}, {"norm": "post", "final_norm": False}, {"pos_encoding": "learned"}, {"share_embeddings": True},
    {"tie_output": True}, {"share_embeddings": True, "tie_output": True}, {"d_ff": 7, "n_layers": 1},
    {"src_vocab_size": 13, "tgt_vocab_size": 17},
])
def test_parameter_count_matches_closed_form(overrides):
    config = tiny_config(**overrides)
    assert Transformer(config).num_parameters() == expected_parameter_count(config)


def test_logits_shape():
    model = Transformer(tiny_config(vocab_size=10))
    src, tgt = torch.randint(1, 10, (2, 9)), torch.randint(1, 10, (2, 7))
    assert model(src, tgt).shape == (2, 7, 10)


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "learned"])
def test_fused_and_explicit_attention_agree(norm, pos_encoding):
    torch.manual_seed(0)
    model = Transformer(tiny_config(norm=norm, pos_encoding=pos_encoding, final_norm=norm == "pre")).eval()
    src, tgt = torch.randint(1, 11, (3, 9)), torch.randint(1, 11, (3, 7))
    src[1, 5:] = 0
    tgt[2, 4:] = 0
    fused = model(src, tgt)
    model.use_fused_attention(False)
    explicit = model(src, tgt)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)  # other sums, float32 rounding on logits of order 1


def test_sinusoidal_table_follows_the_paper():
    model = Transformer(tiny_config(d_model=16))
    table = model.positions.table
    pos, i = 5, 3  # dimensions 2i and 2i+1
    angle = torch.tensor(pos / 10000 ** (2 * i / 16))
    torch.testing.assert_close(table[pos, 2 * i], torch.sin(angle))  # float32 angles computed apart: the defaults
    torch.testing.assert_close(table[pos, 2 * i + 1], torch.cos(angle))


@pytest.mark.parametrize("d_model", [16, 7])
def test_marian_sinusoidal_layout_puts_sines_then_cosines(d_model):
    """Marian's table: the paper's angles, sines in the first ceil(D/2) features and cosines after them."""
    table = Transformer(tiny_config(d_model=d_model, n_heads=1, sinusoidal_layout="halves")).positions.table
    half = (d_model + 1) // 2
    for pos in (0, 5, 63):
        for i in range(half):
            angle = torch.tensor(pos / 10000 ** (2 * i / d_model), dtype=torch.float64)
            assert abs(table[pos, i].item() - torch.sin(angle).item()) < 1e-6  # a float32 table against float64
            if half + i < d_model:
                assert abs(table[pos, half + i].item() - torch.cos(angle).item()) < 1e-6


def test_activation_and_embedding_scale_follow_the_config():
    torch.manual_seed(0)
    relu = Transformer(tiny_config(dropout=0.0)).eval()
    swish = Transformer(tiny_config(dropout=0.0, activation="swish", scale_embedding=False)).eval()
    swish.load_state_dict(relu.state_dict())
    x = torch.randn(2, 3, 16)
    ff = relu.encoder_layers[0].feed_forward
    torch.testing.assert_close(swish.encoder_layers[0].feed_forward(x),  # the same ops: the float32 defaults
                               ff.fc2(torch.nn.functional.silu(ff.fc1(x))))
    torch.testing.assert_close(ff(x), ff.fc2(torch.relu(ff.fc1(x))))  # the same ops: the float32 defaults are ample
    tokens = torch.tensor([[4, 5]])
    torch.testing.assert_close(relu.src_embed(tokens), swish.src_embed(tokens) * 16 ** 0.5)


@pytest.mark.parametrize("overrides, message", [
    ({"activation": "gelu_new"},
     "activation must be one of ('relu', 'gelu', 'gelu_tanh', 'swish', 'silu'), got 'gelu_new'"),
    ({"sinusoidal_layout": "split"},
     "sinusoidal_layout must be one of ('interleaved', 'halves', 'fairseq'), got 'split'"),
    ({"scale_embedding": 1}, "scale_embedding must be true or false, got 1"),
    ({"eos_id": 11}, "eos_id must be a valid id in both vocabularies, in [0, 11), got 11"),
    ({"decoder_start_id": -1}, "decoder_start_id must be a valid id in both vocabularies, in [0, 11), got -1"),
])
def test_new_config_fields_are_validated(overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tiny_config(**overrides)


def test_a_start_token_equal_to_padding_stays_a_key():
    """Marian starts decoding from <pad>: position 0 of the decoder input is a real key, later padding is not."""
    torch.manual_seed(0)
    model = Transformer(tiny_config(dropout=0.0, decoder_start_id=0)).eval()
    src, tgt = torch.tensor([[4, 5, 3]]), torch.tensor([[0, 6, 7]])
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    # trailing padding: no effect, up to float32 rounding (another shape, other sums; assert_close's defaults)
    torch.testing.assert_close(model(src, torch.tensor([[0, 6, 7, 0]]))[:, :3], logits)


def test_tied_output_shares_the_target_embedding():
    model = Transformer(tiny_config(share_embeddings=True, tie_output=True))
    assert model.generator.weight is model.tgt_embed.weight is model.src_embed.weight


@pytest.mark.parametrize("bad, message", [
    ({"d_model": 10, "n_heads": 4}, "divisible"),
    ({"norm": "middle"}, "norm"),
    ({"pos_encoding": "rotary"}, "pos_encoding"),
    ({"share_embeddings": True, "tgt_vocab_size": 12}, "share_embeddings"),
    ({"dropout": 1.5}, "dropout"),
    ({"pad_id": 99}, "pad_id"),
])
def test_invalid_configurations_are_rejected_with_a_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**bad)


def test_unknown_config_keys_are_rejected():
    with pytest.raises(ValueError, match="unknown ModelConfig keys"):
        ModelConfig.from_dict({**SEED_NOTEBOOK, "n_experts": 4})


def test_sequences_longer_than_max_len_raise():
    model = Transformer(tiny_config(max_len=8))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.ones(1, 9, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))



@pytest.mark.parametrize("batch,folded", [(1, True), (16, False)])
def test_incremental_steps_equal_teacher_forcing_with_and_without_the_folded_source(batch, folded):
    """Decoding steps fold the source into the cross-attention only where that reads less (few rows, short
    source); both ways each step's logits and cross-attention must equal the teacher-forced pass."""
    from transformer.core.capture import capture_attention
    from transformer.core.model import padding_mask
    from transformer.core.source_attention import SourceProjection

    torch.manual_seed(0)
    model = Transformer(tiny_config(d_model=64, n_heads=2, norm="post", final_norm=False)).eval()
    src, tgt = torch.randint(1, 11, (batch, 6)), torch.randint(1, 11, (batch, 5))
    src[-1, -2:] = 0  # padding in the last row
    src_mask = padding_mask(src, 0)
    with torch.inference_mode():
        memory = model.encode(src, src_mask)
        assert SourceProjection.pays_off(model.decoder_layers[0].cross_attention, memory) == folded
        with capture_attention(model, ["cross"]) as whole:
            expected = model.decode(memory, src_mask, tgt)
        cache = model.new_cache()
        with capture_attention(model, ["cross"]) as steps:
            logits = [model.decode_step(memory, src_mask, tgt[:, t], cache) for t in range(tgt.size(1))]
    assert (cache.layers[0].source is not None) == folded
    # step by step with a cache against one pass: other shapes and sums, float32 rounding through the layers
    torch.testing.assert_close(torch.stack(logits, dim=1), expected, atol=1e-5, rtol=1e-4)
    stepwise = torch.stack(steps.take("cross"), dim=0).view(tgt.size(1), model.config.n_layers, batch, 2, 1, 6)
    torch.testing.assert_close(stepwise[:, :, :, :, 0].permute(1, 2, 3, 0, 4), whole.cross, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("overrides", [
    {"tie_output": True, "share_embeddings": True},
    {"pos_encoding": "relative", "norm_kind": "rms", "gated_ff": True, "head_dim": 6},
    {"pos_encoding": "learned", "decoder_positions": True, "position_offset": 2, "embedding_norm": True},
    {"sinusoidal_layout": "fairseq", "position_offset": 2},
])
def test_an_empty_model_filled_from_its_file_equals_the_model_saved(overrides, tmp_path):
    """Transformer.empty (nothing initialised, as loading builds a model) plus the file: every tensor equal, the tied
    matrix one tensor again, the positional table the one the config derives."""
    torch.manual_seed(0)
    saved = Transformer(tiny_config(**overrides)).eval()
    save_checkpoint(tmp_path, saved, [])
    loaded = Transformer.empty(saved.config)
    load_weights(loaded, tmp_path / WEIGHTS_FILE)
    for (name, mine), theirs in zip(loaded.state_dict().items(), saved.state_dict().values()):
        assert torch.equal(mine, theirs), name
    torch.testing.assert_close(loaded.positions.table, saved.positions.table, atol=0, rtol=0)
    if saved.config.tie_output:
        assert loaded.generator.weight is loaded.tgt_embed.weight
    src, tgt = torch.tensor([[4, 5, 6, 3]]), torch.tensor([[2, 7, 8]])
    torch.testing.assert_close(loaded.eval()(src, tgt), saved(src, tgt), atol=0, rtol=0)
