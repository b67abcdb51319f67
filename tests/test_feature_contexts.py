"""What a latent is (transformer/features/contexts.py) against brute force over a small corpus: its top contexts are
the corpus's strongest rows found by sorting every (row, activation) pair, its label their most common pieces, the
pieces it promotes the output projection times its direction, and a piece's latents their mean over its rows."""
from collections import Counter

import pytest
import torch

from transformer.features import DictionaryConfig, DictionaryError, SparseDictionary
from transformer.features.contexts import label_of, latents_of_piece, promoted_pieces, top_contexts
from transformer.features.gather import gather_activations

from .conftest import synthetic_pairs

POINT = "encoder_layers.1.output"


@pytest.fixture(scope="module")
def corpus(random_translator):
    sources = [source for source, _ in synthetic_pairs(40, seed=21)]
    gathered = gather_activations(random_translator, POINT, sources, batch_size=16)
    pieces = [random_translator.tokenizer.id_to_piece(int(i)) for i in gathered.token_ids]
    dictionary = SparseDictionary(DictionaryConfig(d_model=gathered.vectors.shape[1], n=24, k=3, seed=4))
    with torch.no_grad():
        dictionary.b_enc.copy_(0.05 * torch.randn(24, generator=torch.Generator().manual_seed(2)))
    return gathered, pieces, dictionary


def test_the_top_contexts_are_the_corpus_top_by_brute_force(corpus):
    gathered, _, dictionary = corpus
    with torch.no_grad():
        z = dictionary.encode(gathered.vectors)  # every row at once
    found = top_contexts(dictionary, gathered.vectors, per_latent=5, batch_size=7)  # merged over 7-row batches
    active = {j for j in range(24) if z[:, j].max() > 0}
    assert set(found) == active and active
    for latent in active:
        pairs = sorted(((-float(z[r, latent]), r) for r in range(len(z)) if z[r, latent] > 0))[:5]
        assert [(c.row, c.activation) for c in found[latent]] == [(r, -v) for v, r in pairs]


def test_labels_promoted_pieces_and_a_piece_s_latents_by_hand(corpus, random_translator):
    gathered, pieces, dictionary = corpus
    latent, contexts = next(iter(top_contexts(dictionary, gathered.vectors, per_latent=8).items()))
    counts = Counter(pieces[c.row].replace("▁", "") or pieces[c.row] for c in contexts)
    assert label_of(contexts, pieces, words=2) == " / ".join(p for p, _ in counts.most_common(2))
    change = random_translator.model.generator.weight.float() @ dictionary.W_dec[latent].detach()
    want = change.topk(4)
    got = promoted_pieces(random_translator, dictionary, latent, top=4)
    assert [p for p, _ in got] == [random_translator.tokenizer.id_to_piece(int(i)) for i in want.indices]
    assert [v for _, v in got] == pytest.approx(want.values.tolist(), abs=1e-5)
    piece = Counter(pieces).most_common(1)[0][0]
    rows = [i for i, p in enumerate(pieces) if p == piece]
    with torch.no_grad():
        mean = dictionary.encode(gathered.vectors)[rows].mean(0)
    expected = [(int(j), float(mean[j])) for j in mean.argsort(descending=True)[:3] if mean[j] > 0]
    assert [(j, pytest.approx(v, abs=1e-6)) for j, v in expected] == latents_of_piece(
        dictionary, gathered.vectors, pieces, piece, top=3)
    with pytest.raises(DictionaryError, match="piece"):
        latents_of_piece(dictionary, gathered.vectors, pieces, "▁nowhere")
    with pytest.raises(DictionaryError, match="latent"):
        promoted_pieces(random_translator, dictionary, 24)
