"""The atlas's head maps (transformer/atlas/maps.py): a head built to attend to the previous token places each query
beside the previous position's key; the AttentionViz shift leaves every softmax unchanged; new points land where
the map's own projection puts them."""
import numpy as np
import pytest
import torch

from transformer.atlas import Atlas, BuildSettings, build_atlas
from transformer.atlas.maps import head_map, normalisation, place, reference_points
from transformer.atlas.query import head_points, placed, sentence_vectors
from transformer.checkpoint import load_checkpoint

from .atlas_fixtures import planted_previous_token_checkpoint


@pytest.fixture(scope="module")
def planted(tmp_path_factory, corpus_dir, tokenizer_file):
    root = tmp_path_factory.mktemp("planted")
    return planted_previous_token_checkpoint(root / "checkpoint", tokenizer_file), corpus_dir, root


@pytest.fixture(scope="module")
def planted_atlas(planted):
    checkpoint, corpus_dir, root = planted
    build_atlas(checkpoint, corpus_dir, root / "atlas", BuildSettings(sentences=14, sample=10_000, projection="pca"))
    return Atlas.open(root / "atlas")


def test_the_planted_head_attends_to_the_previous_token(planted):
    checkpoint, _, _ = planted
    model, _, _ = load_checkpoint(checkpoint)
    src = torch.tensor([[5, 9, 12, 7, 30, 3]])
    with torch.no_grad():
        q, k, _ = model.encoder_layers[0].self_attention.project_self(model.embed(src, model.src_embed))
    assert torch.equal((q[0, 0] @ k[0, 0].T)[1:].argmax(-1), torch.arange(5))  # argmaxes of a planted margin: exact


@pytest.mark.parametrize("projection", ["pca", "tsne"])
def test_a_previous_token_head_puts_each_query_beside_the_previous_key(planted_atlas, projection):
    points = head_points(planted_atlas, "encoder_self", 0, 0)  # every token is in the sample here
    queries, keys = points["queries"], points["keys"]
    coordinates = {"queries": queries["coordinates"], "keys": keys["coordinates"]}
    if projection == "tsne":  # the same head's sampled vectors, mapped by openTSNE (the atlas was built with PCA)
        vectors = [np.asarray(planted_atlas.samples("encoder_self", part)[0, 0], np.float32)
                   for part in ("queries", "keys")]
        tsne = head_map(*vectors, "tsne").coordinates
        coordinates = {"queries": tsne[: len(vectors[0])], "keys": tsne[len(vectors[0]) :]}
    key_at = {(s, p): i for i, (s, p) in enumerate(zip(keys["sentence"], keys["position"]))}
    pairs = [(i, key_at[(s, p - 1)]) for i, (s, p) in enumerate(zip(queries["sentence"], queries["position"])) if p]
    assert len(pairs) > 100
    to_previous = np.array([np.linalg.norm(coordinates["queries"][i] - coordinates["keys"][j]) for i, j in pairs])
    every_pair = np.linalg.norm(coordinates["queries"][:, None] - coordinates["keys"][None], axis=-1)
    assert np.all(to_previous < np.median(every_pair)), (to_previous.max(), np.median(every_pair))


def test_the_shift_and_scale_leave_every_softmax_unchanged():
    rng = np.random.default_rng(0)
    queries, keys = rng.normal(1.0, 1.0, (40, 8)), rng.normal(-2.0, 3.0, (50, 8))
    norm = normalisation(queries, keys)
    moved_q, moved_k = norm.queries(queries).astype(np.float64), norm.keys(keys).astype(np.float64)
    # before the scaling, the keys' centroid is the queries'
    np.testing.assert_allclose(moved_q.mean(0) / norm.scale, moved_k.mean(0) * norm.scale, atol=1e-5)
    softmax = lambda s: np.exp(s - s.max(1, keepdims=True)) / np.exp(s - s.max(1, keepdims=True)).sum(1, keepdims=True)  # noqa: E731
    # float32 storage of the shift and scale: scores move by ~1e-6 of their size
    np.testing.assert_allclose(softmax(moved_q @ moved_k.T), softmax(queries @ keys.T), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(moved_q, axis=1).mean(), np.linalg.norm(moved_k, axis=1).mean(),
                               rtol=1e-5)


def test_a_map_point_placed_again_lands_on_itself():
    rng = np.random.default_rng(1)
    queries, keys = rng.normal(size=(60, 6)).astype(np.float32), rng.normal(size=(70, 6)).astype(np.float32)
    pca_map = head_map(queries, keys, "pca")
    # the same float32 projection applied again, to other arrays: float32 rounding on coordinates of order 1
    np.testing.assert_allclose(place(pca_map, queries, "queries", "pca"), pca_map.coordinates[:60], atol=1e-4)
    np.testing.assert_allclose(place(pca_map, keys, "keys", "pca"), pca_map.coordinates[60:], atol=1e-4)


def test_a_new_sentence_is_placed_on_a_tsne_map_near_its_corpus_twin(planted, planted_atlas):
    """The translation on screen goes onto a t-SNE map by openTSNE's transform; a corpus sentence placed anew lands
    near its own points (the corpus's points do not move)."""
    checkpoint, corpus_dir, _ = planted
    samples = [np.asarray(planted_atlas.samples("encoder_self", part)[0, 1], np.float32)
               for part in ("queries", "keys")]
    tsne_map = head_map(*samples, "tsne")
    model, tokenizer, _ = load_checkpoint(checkpoint)
    sentence = (corpus_dir / "train.en").read_text().splitlines()[3]
    vectors = sentence_vectors(model, tokenizer, sentence)
    new_queries = np.asarray(vectors.extracted["encoder_self_queries"][:, 0, 1], np.float32)
    where = place(tsne_map, new_queries, "queries", "tsne", reference_points(tsne_map, *samples))
    points = head_points(planted_atlas, "encoder_self", 0, 1)["queries"]
    own = [i for i, s in enumerate(points["sentence"]) if s == 3]
    spread = np.ptp(tsne_map.coordinates, axis=0).max()
    distance = np.linalg.norm(where - tsne_map.coordinates[own], axis=1)
    assert np.median(distance) < 0.1 * spread, (distance, spread)


def test_the_translation_is_placed_on_a_pca_map_by_its_linear_map(planted, planted_atlas):
    checkpoint, corpus_dir, _ = planted
    model, tokenizer, _ = load_checkpoint(checkpoint)
    vectors = sentence_vectors(model, tokenizer, (corpus_dir / "train.en").read_text().splitlines()[3])
    where = placed(planted_atlas, vectors, "cross", 1, 0)
    points = head_points(planted_atlas, "cross", 1, 0)
    # source sentence 4's keys are in the corpus: placed anew, they land on their own points (float16 storage)
    own = [i for i, s in enumerate(points["keys"]["sentence"]) if s == 3]
    np.testing.assert_allclose(where["keys"], points["keys"]["coordinates"][own], atol=1e-2)


def test_similar_heads_rank_a_turned_copy_of_a_map_first():
    """Two maps of the same points that differ by a rotation, a scale and a shift have the same neighbourhoods: the
    copy ranks first, with overlap 1, and an unrelated map far below."""
    from transformer.atlas.maps import HeadMap, Normalisation
    from transformer.atlas.similar import ranked, similarity_matrix

    rng = np.random.default_rng(3)
    points = rng.normal(size=(300, 2))
    turn = np.array([[np.cos(1.0), -np.sin(1.0)], [np.sin(1.0), np.cos(1.0)]])
    plain = lambda xy: HeadMap(xy, 150, Normalisation(np.zeros(2, np.float32), 1.0), np.zeros(2), np.eye(2))  # noqa: E731
    maps = [[plain(points), plain(rng.normal(size=(300, 2)))], [plain(rng.normal(size=(300, 2))),
                                                                  plain(3 * points @ turn.T + 5)]]
    order = ranked(similarity_matrix(maps), 0, 2)
    assert order[0][:2] == (1, 1) and order[0][2] == pytest.approx(1.0)  # a share of counted neighbours
    assert max(share for _, _, share in order[1:]) < 0.2  # unrelated maps share ~10/299 of each neighbourhood


def test_a_tsne_map_keeps_clusters_and_nearest_neighbours():
    """The build's t-SNE settings (fewer iterations, Barnes-Hut) on 8 well-separated clusters in 32 dimensions, 60
    queries and 60 keys each: nearly every point's 10 nearest neighbours on the map are of its own cluster (chance:
    1 in 8), and a point keeps far more of its 10 nearest neighbours in the input than a random map does."""
    rng = np.random.default_rng(4)
    centres = rng.normal(scale=6.0, size=(8, 32))
    labels = np.repeat(np.arange(8), 60)
    queries = (centres[labels] + rng.normal(size=(480, 32))).astype(np.float32)
    keys = (centres[labels] + rng.normal(size=(480, 32))).astype(np.float32)
    head = head_map(queries, keys, "tsne", threads=2)
    points = reference_points(head, queries, keys)
    both = np.concatenate([labels, labels])

    def neighbours(xy):  # each point's 10 nearest others, by exact distances computed here
        distances = ((xy[:, None] - xy[None]) ** 2).sum(-1)
        np.fill_diagonal(distances, np.inf)
        return np.argsort(distances, axis=1)[:, :10]

    on_map, in_input = neighbours(head.coordinates.astype(np.float64)), neighbours(points.astype(np.float64))
    assert (both[on_map] == both[:, None]).mean() > 0.9
    kept = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(on_map, in_input)])
    random_map = neighbours(rng.normal(size=(len(points), 2)))
    by_chance = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(random_map, in_input)])
    assert kept > 0.2 and kept > 10 * by_chance, (kept, by_chance)
