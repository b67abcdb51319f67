import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

from transformer import Tokenizer, Translator
from transformer.checkpoint import CheckpointError, load_checkpoint, unique_state_dict
from transformer.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID

UNICODE_TEXT = ["Ein Mann fährt Fahrrad über die Straße.", "naïve café, 日本語のテキスト", "שלום עולם مرحبا",
                "emoji 🚲🐕 and Ωμέγα", "Zoë’s “quotes” — dash"]


def test_special_ids_are_fixed(tokenizer_file):
    tok = Tokenizer.load(tokenizer_file)
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert [tok.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


@pytest.mark.parametrize("text", UNICODE_TEXT)
def test_unicode_round_trip(tokenizer_file, text):
    tok = Tokenizer.load(tokenizer_file)
    ids = tok.encode(text)
    assert UNK_ID not in ids  # unseen characters fall back to bytes
    assert tok.decode(ids) == text


def test_pieces_and_ids_agree(tokenizer_file):
    tok = Tokenizer.load(tokenizer_file)
    text = "a man rides a red bike ."
    assert [tok.id_to_piece(i) for i in tok.encode(text)] == tok.pieces(text)
    assert "".join(tok.pieces(text)).replace("▁", " ").strip() == text


def test_every_piece_is_sentencepieces_own_and_a_bad_id_is_refused(tokenizer_file):
    tok = Tokenizer.load(tokenizer_file)
    assert [tok.id_to_piece(i) for i in range(tok.vocab_size)] == [
        tok.processor.IdToPiece(i) for i in range(tok.vocab_size)
    ]
    assert tok.id_to_piece(torch.tensor(3)) == "</s>"
    for bad in (-1, tok.vocab_size):
        with pytest.raises(IndexError, match="out of range"):
            tok.id_to_piece(bad)


def test_a_file_that_is_not_a_sentencepiece_model_is_rejected(tmp_path):
    bad = tmp_path / "spm.model"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="spm.model"):
        Tokenizer.load(bad)


@pytest.fixture
def checkpoint(random_translator, tmp_path):
    return random_translator.save_pretrained(tmp_path / "ckpt")


def test_save_load_gives_identical_logits(random_translator, checkpoint):
    loaded = Translator.from_pretrained(checkpoint)
    src, tgt = torch.randint(4, 50, (2, 6)), torch.randint(4, 50, (2, 5))
    # exact: the weights are copied bit for bit, and the same ops run on the same inputs in the same process and thread
    assert torch.equal(random_translator.model(src, tgt), loaded.model(src, tgt))
    assert (
        loaded.translate("a man rides a bike .").tgt_ids == random_translator.translate("a man rides a bike .").tgt_ids
    )


def test_half_precision_storage_loads_as_float32(random_translator, tmp_path):
    folder = random_translator.save_pretrained(tmp_path / "half", dtype=torch.float16)
    model, _, _ = load_checkpoint(folder)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    for name, p in model.state_dict().items():  # the same rounding to float16 on both sides: equal to the bit
        torch.testing.assert_close(p, random_translator.model.state_dict()[name].half().float(), rtol=0, atol=0)


def test_tied_weights_survive_a_round_trip(checkpoint):
    model, _, _ = load_checkpoint(checkpoint)
    assert model.generator.weight is model.tgt_embed.weight


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "spm.model"])
def test_missing_file_is_named(checkpoint, name):
    (checkpoint / name).unlink()
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.") + ".*missing"):
        load_checkpoint(checkpoint)


def test_truncated_weights_are_named(checkpoint):
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*truncated"):
        load_checkpoint(checkpoint)


def test_wrong_shaped_weights_are_named(checkpoint):
    model, _, _ = load_checkpoint(checkpoint)
    state = {k: v.clone() for k, v in model.state_dict().items() if k != "generator.weight"}
    state.pop("tgt_embed.embedding.weight", None)
    state["encoder_layers.0.feed_forward.fc1.weight"] = torch.zeros(3, 3)
    save_file(state, str(checkpoint / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*fc1\.weight.*shape \[3, 3\]"):
        load_checkpoint(checkpoint)


def test_config_that_does_not_match_the_weights_is_named(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    config["model"]["n_layers"] += 1
    (checkpoint / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*missing tensors"):
        load_checkpoint(checkpoint)


def test_invalid_config_json_is_named(checkpoint):
    (checkpoint / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"config\.json.*not valid JSON"):
        load_checkpoint(checkpoint)


def test_tokenizer_of_another_size_is_named(checkpoint, tmp_path, corpus_dir):
    Tokenizer.train([corpus_dir / "train.en"], tmp_path / "other.model", vocab_size=290)
    shutil.copy(tmp_path / "other.model", checkpoint / "spm.model")
    with pytest.raises(CheckpointError, match=r"spm\.model.*does not match"):
        load_checkpoint(checkpoint)


def test_pickles_are_never_loaded(checkpoint):
    torch.save({"x": torch.zeros(1)}, checkpoint / "model.safetensors")  # a pickle under the weights' name
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_checkpoint(checkpoint)


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")


def test_checkpoints_with_separate_query_key_value_projections_still_load(tmp_path, random_translator):
    """Checkpoints written before the q/k/v projections were stacked hold q_proj, k_proj and v_proj: written
    that way by hand here, they must load into the stacked layout and translate exactly as before."""
    folder = random_translator.save_pretrained(tmp_path / "stacked")
    state = {k: v.clone() for k, v in unique_state_dict(random_translator.model).items()}
    legacy = {}
    for name, tensor in state.items():
        if ".in_proj." in name:
            for part, rows in zip("qkv", tensor.chunk(3)):
                legacy[name.replace(".in_proj.", f".{part}_proj.")] = rows.contiguous()
        else:
            legacy[name] = tensor
    assert not any(".in_proj." in name for name in legacy)
    save_file(legacy, str(folder / "model.safetensors"))
    loaded = Translator.from_pretrained(folder)
    text = "a man rides a red bike ."
    assert loaded.translate(text).text == random_translator.translate(text).text
    for name, tensor in state.items():  # split and stacked again, never computed: equal to the bit
        torch.testing.assert_close(loaded.model.state_dict()[name], tensor, rtol=0, atol=0)
    fresh = type(random_translator.model)(random_translator.model.config)
    fresh.load_state_dict(legacy, strict=False)  # the resume and timeline paths load this way
    for name, tensor in state.items():
        torch.testing.assert_close(fresh.state_dict()[name], tensor, rtol=0, atol=0)
