"""Why X and not Y (analysis/contrastive.py): each score against a finite difference of the log-odds when that one
embedding is scaled, computed in this test with a forward hook and no autograd, in float64."""
import numpy as np
import pytest
import torch

from transformer import Transformer
from transformer.analysis.contrastive import contrastive_input_x_gradient
from transformer.tokenizer import BOS_ID

from .conftest import tiny_config

SRC = [5, 7, 3, 9, 2]
TGT = [4, 8, 6, 10, 2]


@pytest.fixture(scope="module", params=[True, False], ids=["shared-embeddings", "separate-embeddings"])
def model(request):
    torch.manual_seed(5)
    return Transformer(tiny_config(n_layers=2, share_embeddings=request.param, tie_output=False)).double().eval()


def log_odds(model, step, foil, side=None, position=None, eps=0.0) -> float:
    src, tgt_in = torch.tensor([SRC]), torch.tensor([[BOS_ID] + TGT[:step]])

    def scale(module, inputs, output):
        if (side == "source" and inputs[0] is src) or (side == "prefix" and inputs[0] is tgt_in):
            output = output.clone()
            output[0, position] *= 1 + eps
        return output

    handles = [model.src_embed.register_forward_hook(scale)]
    if model.tgt_embed is not model.src_embed:
        handles.append(model.tgt_embed.register_forward_hook(scale))
    try:
        with torch.no_grad():
            log_probs = model(src, tgt_in)[0, -1].log_softmax(-1)
    finally:
        for handle in handles:
            handle.remove()
    return float(log_probs[TGT[step]] - log_probs[foil])


@pytest.mark.parametrize("step, foil", [(0, 3), (2, 9), (4, 1)])
def test_each_score_is_the_log_odds_change_when_that_embedding_is_scaled(model, step, foil):
    contrast = contrastive_input_x_gradient(model, SRC, TGT, step, foil)
    # a float64 model: the same log-odds by another pass, far inside approx's 1e-6 relative
    assert contrast.chosen_id == TGT[step] and contrast.log_odds == pytest.approx(log_odds(model, step, foil))
    assert contrast.source.shape == (len(SRC),) and contrast.prefix.shape == (step + 1,)
    eps = 1e-5
    for side, scores in (("source", contrast.source), ("prefix", contrast.prefix)):
        differences = [
            (log_odds(model, step, foil, side, p, eps) - log_odds(model, step, foil, side, p, -eps)) / (2 * eps)
            for p in range(len(scores))
        ]
        # a float64 central difference: O(eps^2) = 1e-10 relative, plus float64 rounding / eps ~ 1e-11
        np.testing.assert_allclose(scores, differences, rtol=1e-5, atol=1e-7)


def test_a_foil_equal_to_the_choice_explains_nothing(model):
    contrast = contrastive_input_x_gradient(model, SRC, TGT, 1, TGT[1])
    assert contrast.log_odds == 0 and not contrast.source.any() and not contrast.prefix.any()


@pytest.mark.parametrize("step, foil, message", [(5, 3, r"step must be in \[0, 4\]"), (1, 99, r"foil_id must be")])
def test_bad_arguments_are_named(model, step, foil, message):
    with pytest.raises(ValueError, match=message):
        contrastive_input_x_gradient(model, SRC, TGT, step, foil)
