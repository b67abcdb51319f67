"""A dictionary's catalogue (transformer/features/catalogue.py) and one sentence read through it (reading.py), against
brute force over a small corpus: its contexts are the corpus's strongest rows with their sentences' own texts, its
histogram and counts of active rows are np.histogram and a count over every row, the saved file reads back the same
and a damaged one is refused by name; a sentence's latents are the dictionary's encoding of the vectors recorded by
hand at the point; `top` prints the same from the command line."""
import json

import numpy as np
import pytest
import torch

from transformer.core.capture import record
from transformer.features import DictionaryError, Origin, save_dictionary
from transformer.features.catalogue import CATALOGUE_FILE, build_catalogue, load_catalogue, save_catalogue
from transformer.features.cli import main
from transformer.features.gather import gather_activations
from transformer.features.reading import describe, marked_text, sentence_latents

from .conftest import synthetic_pairs
from .test_feature_steering import random_dictionary

BINS = 5


@pytest.fixture(scope="module", params=["encoder_layers.1.output", "decoder_layers.0.output"])
def built(request, random_translator):
    pairs = synthetic_pairs(30, seed=8)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    saved = random_dictionary(random_translator.model.config.d_model, request.param, n=20, k=3)
    catalogue = build_catalogue(random_translator, saved, sources, targets, "synthetic", per_latent=4, bins=BINS,
                                batch_size=9)
    gathered = gather_activations(random_translator, request.param, sources, targets)
    with torch.no_grad():
        z = saved.dictionary.encode(gathered.vectors).double().numpy()  # every row at once
    return saved, catalogue, gathered, z, sources, targets


def test_contexts_histograms_and_counts_are_the_corpus_s_by_brute_force(built):
    saved, catalogue, gathered, z, sources, targets = built
    assert catalogue.tokens == len(z) and catalogue.n == 20
    assert catalogue.active.tolist() == (z > 0).sum(0).tolist()
    for latent in range(20):
        rows = sorted((r for r in range(len(z)) if z[r, latent] > 0), key=lambda r: (-z[r, latent], r))[:4]
        found = catalogue.contexts(latent)
        assert [c.activation for c in found] == pytest.approx([z[r, latent] for r in rows], rel=1e-5)
        for context, row in zip(found, rows):
            sentence = int(gathered.sentences[row])
            assert catalogue.sources[context.sentence] == sources[sentence]  # the sentence's own text, kept
            assert catalogue.targets[context.sentence] == targets[sentence]
            assert (context.position, context.piece) == (int(gathered.positions[row]), int(gathered.token_ids[row]))
        values = z[:, latent][z[:, latent] > 0]
        edges, counts = catalogue.histogram_of(latent)
        if len(values):
            # equal bins from 0 to the largest, each closed on its right: the largest in the last
            expected = [int(((values > low) & (values <= high)).sum()) for low, high in zip(edges, edges[1:])]
            expected[-1] += int((values > edges[-1]).sum())  # float rounding of the top edge
            assert counts.tolist() == expected and counts.sum() == len(values)
            assert edges[-1] == pytest.approx(values.max(), rel=1e-6)
        else:
            assert counts.sum() == 0 and found == []


def test_the_file_reads_back_the_same_and_damage_is_named(built, tmp_path):
    saved, catalogue, *_ = built
    path = save_catalogue(tmp_path, catalogue)
    again = load_catalogue(tmp_path, 20)
    for name in ("sentence", "position", "activation", "piece", "histogram", "active"):
        assert np.array_equal(getattr(again, name), getattr(catalogue, name)), name
    assert (again.sources, again.targets, again.point, again.tokens) == (catalogue.sources, catalogue.targets,
                                                                         catalogue.point, catalogue.tokens)
    with pytest.raises(DictionaryError, match="latents"):
        load_catalogue(tmp_path, 21)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(DictionaryError, match=CATALOGUE_FILE):
        load_catalogue(tmp_path)
    with pytest.raises(DictionaryError, match="no catalogue"):
        load_catalogue(tmp_path / "elsewhere")
    with pytest.raises(DictionaryError, match="latent"):
        catalogue.contexts(20)


def test_a_sentence_s_latents_are_the_encoding_of_the_vectors_recorded_by_hand(built, random_translator):
    saved, catalogue, *_ = built
    source, target = synthetic_pairs(1, seed=77)[0]
    src_ids = random_translator.source_ids(source)[0]
    tgt_ids = random_translator.tokenizer.encode_target_batch([target])[0] + [random_translator.tokenizer.eos_id]
    read = sentence_latents(random_translator, saved, src_ids, tgt_ids)
    model, config = random_translator.model, random_translator.model.config
    with torch.no_grad(), record(model, saved.origin.point) as recording:
        src = torch.tensor([src_ids])
        model(src, torch.tensor([[config.decoder_start_id] + tgt_ids[:-1]]))
        z = saved.dictionary.encode(recording[saved.origin.point][0][0].float())
    ids = src_ids if saved.origin.point.startswith("encoder") else tgt_ids
    assert read.tokens == [random_translator.tokenizer.id_to_piece(i) for i in ids]
    assert torch.allclose(read.z, z, atol=1e-5)
    for position in range(len(ids)):
        want = sorted(((-float(z[position, j]), j) for j in range(20) if z[position, j] > 0))[:3]
        assert [j for j, _ in read.top_of(position)] == [j for _, j in want]
    kept = [p for p, token in enumerate(read.tokens) if token != "</s>"]
    best = z[kept].max(0).values
    assert [j for j, _, _ in read.strongest(5)] == sorted((j for j in range(20) if best[j] > 0),
                                                          key=lambda j: (-float(best[j]), j))[:5]
    described = describe(random_translator, saved, catalogue, 3, contexts=2)
    for context, kept_context in zip(described["contexts"], catalogue.contexts(3)):
        assert context["pieces"][context["marked"]] == random_translator.tokenizer.id_to_piece(kept_context.piece)
    assert ("promoted" in described) == (not saved.origin.point.startswith("encoder"))


def test_marked_text_marks_one_word():
    context = {"pieces": ["▁The", "▁dog", "s", "▁runs", "."], "marked": 1}
    assert marked_text(context) == "The [dog]s runs."


def test_top_on_the_command_line(random_translator, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "dictionary"
    saved = random_dictionary(random_translator.model.config.d_model, "encoder_layers.1.output", n=20, k=3)
    save_dictionary(folder, saved.dictionary, Origin(saved.origin.point, "tiny", "synthetic", 30))
    monkeypatch.setattr("transformer.features.cli.Translator.from_pretrained", lambda name: random_translator)
    pairs = synthetic_pairs(30, seed=8)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    languages = random_translator.languages
    (corpus / f"train.{languages['src']}").write_text("\n".join(s for s, _ in pairs) + "\n", encoding="utf-8")
    (corpus / f"train.{languages['tgt']}").write_text("\n".join(t for _, t in pairs) + "\n", encoding="utf-8")
    main(["top", str(folder), "--build", "--corpus", str(corpus), "--sentences", "30"])
    wrote = json.loads(capsys.readouterr().out)
    assert wrote["sentences"] == 30 and (folder / CATALOGUE_FILE).is_file()
    expected = build_catalogue(random_translator, saved, [s for s, _ in pairs], None, "x")
    main(["top", str(folder), "--latent", "3", "--contexts", "2"])
    shown = json.loads(capsys.readouterr().out)
    assert [c["activation"] for c in shown["contexts"]] == pytest.approx(
        [c.activation for c in expected.contexts(3)[:2]], abs=1e-4)
    for argv, named in ([["top", str(folder), "--latent", "20"], "latent"],
                        [["top", str(folder), "--latent", "1", "--corpus", "x"], "--corpus"],
                        [["top", str(folder), "--contexts", "0", "--latent", "1"], "--contexts"]):
        with pytest.raises(SystemExit) as ended:
            main(argv)
        assert ended.value.code == 2 and named in capsys.readouterr().err
