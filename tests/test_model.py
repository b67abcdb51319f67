import pytest
import torch

from transformer import ModelConfig, Transformer, expected_parameter_count

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
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)


def test_sinusoidal_table_follows_the_paper():
    model = Transformer(tiny_config(d_model=16))
    table = model.positions.table
    pos, i = 5, 3  # dimensions 2i and 2i+1
    angle = torch.tensor(pos / 10000 ** (2 * i / 16))
    torch.testing.assert_close(table[pos, 2 * i], torch.sin(angle))
    torch.testing.assert_close(table[pos, 2 * i + 1], torch.cos(angle))


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

