"""Head importance and pruning (analysis/importance.py): log-likelihoods against a hand loop over sentences, BLEU
against sacreBLEU on sentence-by-sentence translations, the pruning order and curve against a scorer whose
numbers are known, and the JSON the CLI writes."""
import json

import pytest
import sacrebleu
import torch

from transformer import Tokenizer, Transformer, Translator
from transformer.analysis.importance import (
    CorpusScorer,
    HeadImportance,
    all_heads,
    head_importance,
    main,
    pruning_curve,
    pruning_order,
    result_json,
)
from transformer.checkpoint import save_checkpoint
from transformer.core.head_mask import check_heads_off, heads_masked
from transformer.corpus.data import read_parallel
from transformer.tokenizer import BOS_ID, EOS_ID

from .conftest import tiny_config

HEAD = ("cross", 1, 2)


@pytest.fixture(scope="module")
def small_val(corpus_dir):
    corpus = read_parallel(corpus_dir, "val", "en", "de")
    corpus.source, corpus.target = corpus.source[:6], corpus.target[:6]
    return corpus


def hand_log_likelihood(translator, corpus, heads_off) -> float:
    """One sentence at a time, no padding: log_softmax of the logits, the reference pieces picked out by hand."""
    model, tokenizer, max_len = translator.model, translator.tokenizer, translator.model.config.max_len
    total, count = 0.0, 0
    with torch.no_grad(), heads_masked(model, heads_off):
        for source, reference in zip(corpus.source, corpus.target):
            src = torch.tensor([tokenizer.encode(source)[: max_len - 1] + [EOS_ID]])
            wanted = tokenizer.encode(reference)[: max_len - 2] + [EOS_ID]
            decoder_input = torch.tensor([[BOS_ID] + wanted[:-1]])
            log_probs = torch.log_softmax(model(src, decoder_input)[0].double(), dim=-1)
            total += sum(float(log_probs[position, token]) for position, token in enumerate(wanted))
            count += len(wanted)
    return total / count


def test_log_likelihood_with_a_head_off_matches_a_hand_loop(random_translator, small_val):
    scorer = CorpusScorer(random_translator, small_val, batch_size=4, max_tokens=60)  # several padded batches
    base, masked = scorer.log_likelihood(), scorer.log_likelihood([HEAD])
    # padded batches of 4 against one sentence at a time: other shapes, other float32 sums, on mean log-probs of order 5
    assert base == pytest.approx(hand_log_likelihood(random_translator, small_val, []), abs=1e-4)
    assert masked == pytest.approx(hand_log_likelihood(random_translator, small_val, [HEAD]), abs=1e-4)
    assert abs(base - masked) > 1e-4  # the mask reaches the teacher-forced pass


def test_importance_drops_are_base_minus_masked(random_translator, small_val):
    scorer = CorpusScorer(random_translator, small_val, batch_size=4)
    labels = []
    base, [result] = head_importance(scorer, [HEAD], labels.append)
    assert len(labels) == 4
    one_by_one = [random_translator.translate(s, heads_off=[HEAD]).text for s in small_val.source]
    masked_bleu = round(sacrebleu.corpus_bleu(one_by_one, [small_val.target]).score, 2)
    assert result.bleu == masked_bleu  # BLEU of discrete translations, rounded alike: exact
    assert result.bleu_drop == pytest.approx(base["bleu"] - masked_bleu, abs=1e-9)  # one rounding to 2 decimals
    hand_base = hand_log_likelihood(random_translator, small_val, [])
    hand_masked = hand_log_likelihood(random_translator, small_val, [HEAD])
    assert result.log_likelihood_drop == pytest.approx(hand_base - hand_masked, abs=1e-4)  # batched, as above


class KnownScorer:
    """A stand-in scorer: each head costs a known amount of BLEU and log-likelihood, and costs add up."""

    def __init__(self, bleu_cost: dict, ll_cost: dict):
        self.bleu_cost, self.ll_cost, self.calls = bleu_cost, ll_cost, []

    def bleu(self, heads_off=()):
        self.calls.append(list(heads_off))
        return round(40.0 - sum(self.bleu_cost[h] for h in heads_off), 2)

    def log_likelihood(self, heads_off=()):
        return -1.5 - sum(self.ll_cost[h] for h in heads_off)


def test_pruning_goes_from_least_to_most_important_and_accumulates():
    heads = [("encoder_self", 0, 0), ("encoder_self", 0, 1), ("decoder_self", 0, 0), ("cross", 0, 0), ("cross", 0, 1)]
    # two heads tie on BLEU (0.5) and are told apart by log-likelihood; one head improves BLEU when off (-0.3)
    bleu_cost = dict(zip(heads, [0.5, 3.0, 0.5, -0.3, 8.0]))
    ll_cost = dict(zip(heads, [0.20, 0.10, 0.05, 0.01, 0.90]))
    scorer = KnownScorer(bleu_cost, ll_cost)
    base, importances = head_importance(scorer, heads)
    assert base == {"bleu": 40.0, "log_likelihood": -1.5}
    assert [i.bleu_drop for i in importances] == [0.5, 3.0, 0.5, -0.3, 8.0]
    # given numbers, subtracted in float64: exact for the BLEU drops above, float64 rounding for these
    assert [i.log_likelihood_drop for i in importances] == pytest.approx([0.20, 0.10, 0.05, 0.01, 0.90])
    order = pruning_order(importances)
    assert order == [heads[3], heads[2], heads[0], heads[1], heads[4]]
    scorer.calls.clear()
    curve = pruning_curve(scorer, order, base["bleu"])
    assert scorer.calls == [order[:k] for k in range(1, 6)]
    assert [p.heads_off for p in curve] == [0, 1, 2, 3, 4, 5]
    assert [p.bleu for p in curve] == pytest.approx([40.0, 40.3, 39.8, 39.3, 36.3, 28.3])  # given numbers, summed
    data = result_json(base, importances, curve, split="val")
    assert [h["rank"] for h in data["heads"]] == [3, 2, 4, 5, 1]
    assert data["pruning"]["half_pruned"] == {"heads_off": 2, "bleu": 39.8, "bleu_kept": pytest.approx(39.8 / 40)}


def test_equal_heads_keep_the_model_order():
    heads = [("cross", 0, h) for h in range(3)]
    assert pruning_order([HeadImportance(h, 30.0, -2.0, 0.0, 0.0) for h in heads]) == heads


@pytest.fixture(scope="module")
def small_checkpoint(tokenizer_file, tmp_path_factory):
    torch.manual_seed(1)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    model = Transformer(tiny_config(vocab, share_embeddings=True, tie_output=True, n_layers=1, n_heads=2, max_len=24))
    return save_checkpoint(tmp_path_factory.mktemp("small-ckpt"), model, tokenizer_file,
                           {"languages": {"src": "en", "tgt": "de"}})


def test_cli_writes_what_the_app_needs(small_checkpoint, corpus_dir, capsys):
    main(["--checkpoint", str(small_checkpoint), "--data-dir", str(corpus_dir), "--limit", "4", "--batch-size", "2"])
    data = json.loads((small_checkpoint / "head_importance.json").read_text())
    translator = Translator.from_pretrained(small_checkpoint)
    heads = all_heads(translator.model)
    assert len(heads) == 6  # 3 kinds x 1 layer x 2 heads
    assert data["split"] == "val" and data["sentences"] == 4 and data["direction"] == "en-de"
    assert data["decoding"]["strategy"] == "greedy" and "tok:13a" in data["bleu_signature"]
    assert data["command"].startswith("python -m transformer.analysis.importance --checkpoint")
    assert data["minutes"] >= 0 and set(data["base"]) == {"bleu", "log_likelihood"}
    entries = [tuple(h["heads_off_entry"]) for h in data["heads"]]
    assert entries == heads and check_heads_off(translator.model, entries) == heads
    for head in data["heads"]:
        kind, layer, index = head["heads_off_entry"]
        assert (head["kind"], head["layer"], head["head"]) == (kind, layer + 1, index + 1)
        # the JSON rounds BLEU to 2 decimals and log-likelihoods to 4: differences of rounded numbers
        assert head["bleu_drop"] == pytest.approx(data["base"]["bleu"] - head["bleu"], abs=0.011)
        assert head["log_likelihood_drop"] == pytest.approx(data["base"]["log_likelihood"] - head["log_likelihood"],
                                                            abs=1e-3)
    assert sorted(h["rank"] for h in data["heads"]) == list(range(1, 7))
    curve = data["pruning"]["curve"]
    assert [p["heads_off"] for p in curve] == list(range(7)) and curve[0]["added"] is None
    by_rank = sorted(data["heads"], key=lambda h: -h["rank"])  # least important first
    assert [p["added"]["heads_off_entry"] for p in curve[1:]] == [h["heads_off_entry"] for h in by_rank]
    assert data["pruning"]["half_pruned"]["heads_off"] == 3
    # the last point switches every head off: the same BLEU as decoding with all of them off
    all_off = [t.text for t in translator.translate_batch(read_parallel(corpus_dir, "val", "en", "de").source[:4],
                                                          heads_off=heads)]
    reference = read_parallel(corpus_dir, "val", "en", "de").target[:4]
    assert curve[-1]["bleu"] == round(sacrebleu.corpus_bleu(all_off, [reference]).score, 2)  # discrete: exact
    assert "wrote" in capsys.readouterr().out
