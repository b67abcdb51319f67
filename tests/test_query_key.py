"""The query/key breakdown (analysis/query_key.py): its weights are the attention the decoding recorded, and its
query and key vectors are those rebuilt here from the recorded layer inputs and the projection weights."""
import numpy as np
import pytest
import torch

from transformer.analysis.query_key import query_key
from transformer.core.capture import record
from transformer.tokenizer import BOS_ID

from .conftest import FLOAT32_ROUNDING


def projected(attention, x, part: int, head: int):
    """Rows of x (T, D) through the stacked projection's part (0 queries, 1 keys), head `head`: (T, hs)."""
    d, heads = x.size(-1), attention.n_heads
    hs = d // heads
    rows = slice(part * d + head * hs, part * d + (head + 1) * hs)
    return x @ attention.in_proj.weight[rows].T + attention.in_proj.bias[rows]


def independent(model, translation, kind, layer, head):
    """(queries (T, hs), keys (K, hs)) from each layer's normalised input, as a pre-norm layer computes them."""
    src, tgt = torch.tensor([translation.src_ids]), torch.tensor([[BOS_ID] + translation.tgt_ids[:-1]])
    with torch.no_grad(), record(model, ["encoder_hidden", "decoder_hidden"]) as rec:
        model(src, tgt)
        encoder_in = [model.embed(src, model.src_embed)[0]] + list(rec["encoder_hidden"][:-1, 0])
        decoder_in = [model.embed(tgt, model.tgt_embed)[0]] + list(rec["decoder_hidden"][:-1, 0])
        memory = model.encoder_norm(rec["encoder_hidden"][-1, 0])
        if kind == "encoder_self":
            block = model.encoder_layers[layer]
            x = block.attention_residual.norm(encoder_in[layer])
            return projected(block.self_attention, x, 0, head), projected(block.self_attention, x, 1, head)
        block = model.decoder_layers[layer]
        x = block.self_attention_residual.norm(decoder_in[layer])
        if kind == "decoder_self":
            return projected(block.self_attention, x, 0, head), projected(block.self_attention, x, 1, head)
        # the cross-attention's queries come after the self-attention sub-layer: its keys are checked here, its
        # query through the weights it gives, which must be the recorded ones
        return None, projected(block.cross_attention, memory, 1, head)


@pytest.mark.parametrize("kind, layer, head, query", [("encoder_self", 0, 1, 2), ("decoder_self", 2, 3, 3),
                                                       ("cross", 1, 0, 2), ("cross", 2, 2, 0)])
def test_the_breakdown_adds_up_to_the_recorded_attention(random_translator, kind, layer, head, query):
    translation = random_translator.translate("a b c d", capture=True, max_length=6)
    model = random_translator.model
    breakdown = query_key(model, translation.src_ids, translation.tgt_ids, kind, layer, head, query)
    recorded = translation.recorded[kind].values[layer, head, query]
    keys = len(breakdown.weights)
    # one teacher-forced pass against the decoder's steps (cached keys, maybe our float16 kernel): float32 rounding
    # through the layers, on weights <= 1
    np.testing.assert_allclose(breakdown.weights, recorded[:keys], atol=1e-5)
    assert np.allclose(recorded[keys:], 0, atol=1e-6)  # decoder self-attention: nothing after the query itself
    # numpy's sum against torch's vectorised one, over float32 products: other orders, a few ulps of the largest
    # product (the scores may cancel to near 0, so an absolute part too)
    np.testing.assert_allclose(breakdown.products.sum(-1) / np.sqrt(breakdown.query_vector.size), breakdown.scores,
                               **FLOAT32_ROUNDING)
    queries, expected_keys = independent(model, translation, kind, layer, head)
    # vectors rebuilt from the layers' inputs by other products: float32 rounding on values of order 1-10
    np.testing.assert_allclose(breakdown.key_vectors, expected_keys[:keys].numpy(), rtol=1e-4, atol=1e-5)
    if queries is not None:
        np.testing.assert_allclose(breakdown.query_vector, queries[query].numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arguments, message", [(("sideways", 0, 0, 0), "kind must be one of"),
                                                (("cross", 9, 0, 0), "layer and head must be in"),
                                                (("encoder_self", 0, 0, 99), r"query must be in \[0, ")])
def test_bad_arguments_are_named(random_translator, arguments, message):
    translation = random_translator.translate("a b", max_length=4)
    with pytest.raises(ValueError, match=message):
        query_key(random_translator.model, translation.src_ids, translation.tgt_ids, *arguments)
