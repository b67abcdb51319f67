"""The walk-through (transformer/analysis/walkthrough/): each stage recomputed from the previous stage's numbers with
torch operations written here, at every layer (each layer's input is the output recomputed for the layer below), for
tiny pre-norm and post-norm models with sinusoidal and learned positions, tied and untied outputs, with and without a
final norm; the walk's logits against decode_step's; the stage order, the words apart from the numbers."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer import Tokenizer, Transformer, Translator
from transformer.analysis.walkthrough import record_pass, walkthrough
from transformer.analysis.walkthrough.text import MODULES, TEXTS
from transformer.core.capture import record
from transformer.core.head_ref import head_label, layer_label
from transformer.tokenizer import UNK_ID

from .conftest import ROOT, tiny_config

SENTENCE = "a man rides a red bike in the park Ω ."  # Ω: not in the vocabulary
VARIANTS = [  # (norm, positions, tie_output, final_norm, Marian-like: GELU, no embedding scale, sines then cosines)
    ("pre", "sinusoidal", True, True, False),
    ("pre", "learned", False, True, False),
    ("post", "sinusoidal", False, False, False),
    ("post", "learned", True, False, False),
    ("post", "sinusoidal", True, True, True),
]
ATOL = 1e-5  # the walk's float32 pass against float64 rebuilds and decode_step: float32 rounding on values of order 1


@pytest.fixture(scope="module", params=VARIANTS, ids=lambda v: "-".join(str(x) for x in v))
def setup(request, tokenizer_file):
    norm, positions, tie, final, marian_like = request.param
    marian = {"activation": "gelu", "scale_embedding": False, "sinusoidal_layout": "halves"} if marian_like else {}
    torch.manual_seed(1)
    tokenizer = Tokenizer.load(tokenizer_file)
    config = tiny_config(tokenizer.vocab_size, norm=norm, pos_encoding=positions, tie_output=tie, final_norm=final,
                         share_embeddings=tie, d_model=16, n_heads=4, n_layers=2, d_ff=32, **marian)
    model = Transformer(config)
    with torch.no_grad():  # untrained biases are zero: give every one a value, so a forgotten bias shows
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or ".norm." in name or name.endswith("norm.weight"):
                parameter.add_(torch.randn_like(parameter) * 0.3)
    translator = Translator(model.eval(), tokenizer)
    translation = translator.translate(SENTENCE, strategy="greedy", max_length=6)
    assert len(translation.tgt_ids) >= 3
    token, step, head = 2, 2, 1
    walk = walkthrough(model, tokenizer, translation, token=token, step=step, head=head)
    rec = record_pass(model, translation.src_ids, translation.tgt_ids)
    return model, tokenizer, translation, walk, rec, (token, step, head)


def at(walk, layer: int, head: int) -> list:
    """The walk's stages at `layer` and `head` (0-based), from its variants."""
    heads = walk.architecture["n_heads"]
    index = {None: lambda: 0, "layer": lambda: layer, "head": lambda: layer * heads + head}
    return [v.stages[index[v.per]()] for v in walk.variants]


class Layer:
    """The stages of one layer and head, read like a walk: `numbers(view, key)` works on it."""

    def __init__(self, walk, layer, head):
        self.stages = at(walk, layer, head)


def numbers(walk, key) -> dict:
    stage = next(s for s in walk.stages if s.key == key)
    return {n.name: (torch.as_tensor(np.asarray(n.values, dtype=np.float64)) if n.kind in ("vector", "row", "matrix")
                     else n.values) for n in stage.numbers}


def close(a, b, atol=ATOL):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert torch.allclose(a, b, atol=atol, rtol=1e-5), (a - b).abs().max()  # rtol: float32 rounding, relative


def linear(x, layer: torch.nn.Linear, rows=None):
    weight, bias = layer.weight.detach().double(), layer.bias.detach().double()
    if rows is not None:
        weight, bias = weight[rows], bias[rows]
    return torch.as_tensor(x, dtype=torch.float64) @ weight.T + bias


def layer_norm(x, norm: torch.nn.LayerNorm):
    x = torch.as_tensor(x, dtype=torch.float64)
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight.detach().double() + norm.bias.detach().double()


def test_text_to_ids(setup):
    _, tokenizer, translation, walk, _, _ = setup
    n = numbers(walk, "text.pieces")
    assert n["ids"] == tokenizer.encode(SENTENCE) + [tokenizer.eos_id]
    assert n["pieces"] == [tokenizer.id_to_piece(i) for i in n["ids"]]
    assert n["starts_word"] == [p.startswith("▁") for p in n["pieces"]]
    assert n["unknown"] == [i == UNK_ID for i in n["ids"]]
    assert ("not in the vocabulary" in walk.stages[0].text) == (UNK_ID in n["ids"])
    # Ω is not in the vocabulary: the tokenizer spells it in its two UTF-8 bytes
    assert n["byte"] == [p in ("<0xCE>", "<0xA9>") for p in n["pieces"]] and sum(n["byte"]) == 2
    assert "2 piece(s) like <0xCE> are single bytes" in walk.stages[0].text


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_into_the_model(setup, side):
    model, _, translation, walk, _, (token, step, _) = setup
    position = token if side == "encoder" else step
    start = model.config.decoder_start_id
    token_id = translation.src_ids[token] if side == "encoder" else ([start] + translation.tgt_ids)[step]
    embedding = (model.src_embed if side == "encoder" else model.tgt_embed).weight.detach().double()
    row = numbers(walk, f"{side}.embedding")["embedding_row"]
    close(row, embedding[token_id])
    scaled = numbers(walk, f"{side}.scaled")
    scale = math.sqrt(model.config.d_model) if model.config.scale_embedding else 1.0
    close(scaled["embedding_scaled"], row * scale)
    assert scaled["scale"] == pytest.approx(scale, rel=1e-5)  # sqrt(d_model) as float32
    pe = numbers(walk, f"{side}.positions")["positions"]
    d = model.config.d_model
    if model.config.pos_encoding == "sinusoidal":  # the paper's formula, written out here
        i = torch.arange(0, d, 2, dtype=torch.float64)
        angle = position / torch.pow(10000.0, i / d)
        if model.config.sinusoidal_layout == "halves":  # Marian's: every sine, then every cosine
            expected = torch.cat([torch.sin(angle), torch.cos(angle)])
        else:
            expected = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(-1)
        close(pe, expected, atol=1e-4)  # the table's float32 angles (pos / 10000^(2i/d)) against float64
    else:
        close(pe, model.positions.embedding.weight[position])
    close(numbers(walk, f"{side}.input")["input"], scaled["embedding_scaled"] + pe)


def attention_check(model, walk, rec, kind, block, layer_module, attention, position, keys_input, head):
    """q, k, v, scores, mask, softmax, weighted sum, concat and W_O of one attention sub-layer, each from the one
    before it. keys_input: the vectors (K, D) the keys and values are projected from."""
    d, hs = model.config.d_model, model.config.d_model // model.config.n_heads
    pre = model.config.norm == "pre"
    residual_in = numbers(walk, f"{block}.{kind}.residual")["in"]
    x = numbers(walk, f"{block}.{kind}.norm")["out"] if pre else residual_in
    qkv = numbers(walk, f"{block}.{kind}.qkv")
    q = linear(x, attention.in_proj, slice(head * hs, (head + 1) * hs))
    close(qkv["query"], q)
    keys = linear(keys_input, attention.in_proj, slice(d + head * hs, d + (head + 1) * hs))
    values = linear(keys_input, attention.in_proj, slice(2 * d + head * hs, 2 * d + (head + 1) * hs))
    scores = q @ keys.T / math.sqrt(hs)
    if kind == "decoder_self":
        stage = numbers(walk, f"{block}.{kind}.scores")
        close(stage["scores"], scores)
        masked = stage["masked_scores"]  # every step's row
        upper = torch.triu(torch.ones_like(masked, dtype=torch.bool), diagonal=1)
        assert torch.isinf(masked[upper]).all() and (masked[upper] < 0).all()
        close(masked[position, : position + 1], scores)
        softmax = numbers(walk, f"{block}.{kind}.softmax")
        close(softmax["all_weights"], torch.softmax(masked, dim=-1))
        assert (softmax["all_weights"][upper] == 0).all()  # exp(-inf) is exactly 0
        row = softmax["weights"]
        close(row, torch.softmax(masked[position, : position + 1], dim=-1))
    else:
        n = numbers(walk, f"{block}.{kind}.scores")
        close(n["scores"], scores)
        close(n["keys"], keys)
        mask = numbers(walk, f"{block}.{kind}.mask")
        assert (mask["mask"] == 0).all()  # one sentence: no padding
        row = numbers(walk, f"{block}.{kind}.softmax")["weights"]
        close(row, torch.softmax(mask["masked_scores"] + mask["mask"], dim=-1))
    summed = numbers(walk, f"{block}.{kind}.weighted_sum")
    close(summed["values"], values)
    close(summed["head_output"], row @ values)
    concat = numbers(walk, f"{block}.{kind}.concat")["concat"]
    close(concat[head * hs:(head + 1) * hs], summed["head_output"])
    out = numbers(walk, f"{block}.{kind}.output")["output"]
    close(out, linear(concat, attention.out_proj))
    residual = numbers(walk, f"{block}.{kind}.residual")
    close(residual["added"], out)
    close(residual["sum"], residual_in + out)
    if not pre:
        close(numbers(walk, f"{block}.{kind}.norm")["out"], layer_norm(residual["sum"], layer_module.norm))
    else:
        close(numbers(walk, f"{block}.{kind}.norm")["out"], layer_norm(residual_in, layer_module.norm))
    return residual["sum"] if pre else numbers(walk, f"{block}.{kind}.norm")["out"]


def feed_forward_check(model, walk, block, side, residual_module, ff, x_in):
    pre = model.config.norm == "pre"
    sub = f"{side}_ff"
    x = numbers(walk, f"{block}.{sub}.norm")["out"] if pre else x_in
    if pre:
        close(x, layer_norm(x_in, residual_module.norm))
    hidden = numbers(walk, f"{block}.{sub}.hidden")
    activation = {"relu": torch.relu, "gelu": F.gelu}[model.config.activation]
    close(hidden["hidden"], activation(linear(x, ff.fc1)))
    assert hidden["firing"] == int((hidden["hidden"] > 0).sum())
    out = numbers(walk, f"{block}.{sub}.output")["output"]
    close(out, linear(hidden["hidden"], ff.fc2))
    residual = numbers(walk, f"{block}.{sub}.residual")
    close(residual["sum"], x_in + out)
    return residual["sum"] if pre else layer_norm(residual["sum"], residual_module.norm)


def all_keys_input(model, rec, kind, layer, layer_inputs):
    """What every key position of layer `layer`'s `kind` is projected from: the recorded norm output (pre-norm), the
    layer's input (post-norm: `layer_inputs`, every position's, from the recording), or the encoder's output."""
    if kind == "cross":
        return rec["encoder_final"]
    return rec[f"{kind}_residual.normed"][layer] if model.config.norm == "pre" else layer_inputs


def recorded_layer_inputs(rec, side, layer):
    """Every position's input to layer `layer` of `side`, as recorded: the embedding sum or the layer below's output."""
    return torch.cat([rec[f"{side}_input"][None], rec[f"{side}_hidden"]])[layer]


def test_every_encoder_layer(setup):
    model, _, translation, walk, rec, (token, _, head) = setup
    x = numbers(walk, "encoder.input")["input"]
    table = numbers(walk, "encoder.layers")["layers"]
    for index, layer in enumerate(model.encoder_layers):  # each layer's input: the output recomputed below it
        view = Layer(walk, index, head)
        qkv = next(stage for stage in view.stages if stage.key == "encoder.encoder_self.qkv")
        assert qkv.title.startswith(f"Encoder {layer_label(index)}, {head_label(head)}:")
        close(numbers(view, "encoder.encoder_self.residual")["in"], x)
        keys_input = all_keys_input(model, rec, "encoder_self", index, recorded_layer_inputs(rec, "encoder", index))
        close(keys_input[token], numbers(view, "encoder.encoder_self.norm")["out"] if model.config.norm == "pre" else x)
        after = attention_check(model, view, rec, "encoder_self", "encoder", layer.attention_residual,
                                layer.self_attention, token, keys_input, head)
        x = feed_forward_check(model, view, "encoder", "encoder", layer.feed_forward_residual, layer.feed_forward,
                               after)
        # the table follows the same vector (float32 norms against float64)
        assert table[index, -1] == pytest.approx(float(x.norm()), rel=1e-5)
    # one layer's output feeds the next
    assert table[1:, 0].tolist() == pytest.approx(table[:-1, -1].tolist(), rel=1e-6)  # the same tensors, normed again
    assert table[0, 0] == pytest.approx(float(numbers(walk, "encoder.input")["input"].norm()), rel=1e-5)


def test_the_decoder_at_the_step_in_every_layer(setup):
    model, _, translation, walk, rec, (_, step, head) = setup
    assert numbers(walk, "decoder.inputs")["inputs"] == (["<s>"] + translation.tgt_tokens)[: step + 1]
    # the memory the cross-attention reads is the encoder's output: its last layer, through the final norm if any
    memory = rec["encoder_final"]
    last = rec["encoder_hidden"][-1]
    close(memory, layer_norm(last, model.encoder_norm) if model.config.final_norm else last, atol=1e-4)  # float32 norm
    x = numbers(walk, "decoder.input")["input"]
    for index, layer in enumerate(model.decoder_layers):
        view = Layer(walk, index, head)
        close(numbers(view, "decoder.decoder_self.residual")["in"], x)
        keys_input = all_keys_input(model, rec, "decoder_self", index, recorded_layer_inputs(rec, "decoder", index))
        after_self = attention_check(model, view, rec, "decoder_self", "decoder", layer.self_attention_residual,
                                     layer.self_attention, step, keys_input[: step + 1], head)
        close(numbers(view, "decoder.cross.residual")["in"], after_self)
        after_cross = attention_check(model, view, rec, "cross", "decoder", layer.cross_attention_residual,
                                      layer.cross_attention, step, memory, head)
        x = feed_forward_check(model, view, "decoder", "decoder", layer.feed_forward_residual, layer.feed_forward,
                               after_cross)
    # the last layer's output, recomputed layer by layer in float64: float32 rounding carried through the layers
    close(rec["decoder_hidden"][-1, step], x, atol=1e-4)


def test_every_head_at_every_layer(setup):
    """The stages of one layer differ by head only where the head is in them: each head's softmax row is that head's
    recorded attention, and the layer's residual add is the same for every head."""
    model, _, _, walk, rec, (token, step, _) = setup
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            view = Layer(walk, layer, head)
            close(numbers(view, "encoder.encoder_self.softmax")["weights"], rec["encoder_self"][layer, head, token])
            close(numbers(view, "decoder.cross.softmax")["weights"], rec["cross"][layer, head, step])
            close(numbers(view, "decoder.decoder_self.softmax")["all_weights"], rec["decoder_self"][layer, head])
            close(numbers(view, "decoder.cross.residual")["sum"], numbers(Layer(walk, layer, 0),
                                                                          "decoder.cross.residual")["sum"],
                  atol=0)  # one sum per layer, whatever the head: no absolute slack


def decode_step_logits(model, translation, step):
    """The logits of decoding step `step` (0-based) from model.decode_step with its key/value cache, fed <s> and
    the translation's own pieces, independently of the walk's teacher-forced pass."""
    src = torch.tensor([translation.src_ids])
    with torch.no_grad():
        mask = (src != model.config.pad_id)[:, None, None, :]
        memory = model.encode(src, mask)
        cache = model.new_cache()
        for token in [model.config.decoder_start_id] + translation.tgt_ids[:step]:
            logits = model.decode_step(memory, mask, torch.tensor([token]), cache)
    return logits[0].double()


def test_out_of_the_model(setup, tokenizer_file):
    model, tokenizer, translation, walk, rec, (_, step, _) = setup
    expected = decode_step_logits(model, translation, step)
    close(rec["logits"][step], expected, atol=ATOL)  # the walk's final logits are decode_step's
    projection = numbers(walk, "output.projection")
    ids = [tokenizer.piece_to_id(p) for p in next(n for s in walk.stages if s.key == "output.projection"
                                                  for n in s.numbers if n.name == "logits").cols]
    close(projection["logits"], expected[ids], atol=ATOL)
    final = rec["decoder_final"][step]
    last = rec["decoder_hidden"][-1, step]
    close(final, layer_norm(last, model.decoder_norm) if model.config.final_norm else last, atol=1e-4)  # as the memory
    weight = (model.tgt_embed.weight if model.config.tie_output else model.generator.weight).detach()
    close(final.double() @ weight.double().T + model.generator.bias.detach().double(), expected,
          atol=1e-4)  # float64 against decode_step's float32 logits of order 10
    forbidden = expected.clone()
    forbidden[[model.config.pad_id, model.config.decoder_start_id]] = float("-inf")
    probs = torch.softmax(forbidden, dim=-1)
    softmax = numbers(walk, "output.softmax")
    close(softmax["probabilities"], probs.topk(len(ids)).values, atol=1e-6)  # probabilities <= 1: float32 rounding
    assert softmax["chosen_probability"] == pytest.approx(float(probs[translation.tgt_ids[step]]), abs=1e-6)
    # greedy's own (its cached steps, maybe our float16 kernel): float32 rounding through the layers
    assert softmax["chosen_probability"] == pytest.approx(translation.steps[step].prob, abs=1e-5)


def test_stage_order_follows_the_norm_placement(setup):
    model, _, _, walk, _, _ = setup
    keys = [s.key for s in walk.stages]
    norm, qkv, residual = (keys.index(f"encoder.encoder_self.{part}") for part in ("norm", "qkv", "residual"))
    assert (norm < qkv < residual) if model.config.norm == "pre" else (qkv < residual < norm)
    assert ("encoder.final_norm" in keys) == model.config.final_norm
    tied = next(s for s in walk.stages if s.key == "output.projection")
    assert ("ties" in tied.text) == model.config.tie_output
    assert all(s.text and s.formula and s.module for s in walk.stages)


def test_stages_follow_the_architecture(setup):
    """Blocks in the order the data flows, each block's stages one run, and inside a decoder layer: masked
    self-attention, then cross-attention, then feed-forward."""
    _, _, _, walk, _, _ = setup
    blocks = [s.block for s in walk.stages]
    runs = [b for i, b in enumerate(blocks) if i == 0 or blocks[i - 1] != b]
    assert runs == ["text", "input", "encoder", "target", "decoder", "output"]
    groups = [s.group for s in walk.stages if s.block == "decoder"]
    firsts = [groups.index(g) for g in ("self", "cross", "ff", "layers")]
    lasts = [len(groups) - 1 - groups[::-1].index(g) for g in ("self", "cross", "ff")]
    assert firsts == sorted(firsts) and all(last < following for last, following in zip(lasts, firsts[1:]))
    assert len({s.key for s in walk.stages}) == len(walk.stages)


def test_words_apart_from_numbers(setup):
    """Every stage's words come from text.py; facts about the model come from its config; every module path named
    exists and holds the names it lists."""
    model, _, _, walk, _, _ = setup
    config = model.config
    norm = next(s for s in walk.stages if s.key == "encoder.encoder_self.norm")
    assert f"its {config.d_model} features" in norm.text
    hidden = next(s for s in walk.stages if s.key == "encoder.encoder_ff.hidden")
    assert f"{config.d_model} → {config.d_ff} → {config.d_model}" in hidden.text
    projection = next(s for s in walk.stages if s.key == "output.projection")
    assert f"({config.tgt_vocab_size} pieces)" in projection.text
    assert all(s.why and s.why in {t.why for t in TEXTS.values()} | {t.why.format(d_model=config.d_model)
                                                                      for t in TEXTS.values()} for s in walk.stages)
    for module in set(MODULES.values()):
        path, _, names = module.partition(" (")
        assert (ROOT / path).exists(), module
        if names and (ROOT / path).is_file():
            source = (ROOT / path).read_text(encoding="utf-8")
            for name in names.rstrip(")").replace(" and ", ", ").split(", "):
                assert name.split(".")[-1] in source, (module, name)


def test_recording_changes_nothing_and_leaves_no_hooks(setup):
    model, _, translation, _, _, _ = setup
    src = torch.tensor([translation.src_ids])
    tgt = torch.tensor([[model.config.decoder_start_id] + translation.tgt_ids[:-1]])
    with torch.no_grad():
        plain = model(src, tgt)
        with record(model, ["**"]):
            recorded = model(src, tgt)
    # recording attention switches to the explicit path, which sums in another order than the fused one
    assert torch.equal(plain, recorded) or torch.allclose(plain, recorded, atol=1e-6)
    assert all(not m._forward_hooks for m in model.modules())


def test_bad_positions_are_refused(setup):
    model, tokenizer, translation, _, _, _ = setup
    for arguments, field in (({"token": len(translation.src_ids)}, "token"), ({"step": -1}, "step"),
                             ({"head": model.config.n_heads}, "head"), ({"layer": model.config.n_layers}, "layer")):
        with pytest.raises(ValueError, match=field):
            walkthrough(model, tokenizer, translation, **arguments)


def test_every_term_a_stage_uses_is_in_the_glossary(setup):
    from explorer.glossary import GLOSSARY, definition, page_terms

    _, _, _, walk, _, _ = setup
    used = {term for stage in walk.stages for term in stage.terms}
    assert used and all(definition(term) for term in used), sorted(t for t in used if not definition(t))
    for term in ("piece", "▁", "layer", "head", "query", "key", "value", "encoder self-attention",
                 "masked self-attention", "cross-attention", "beam", "length penalty", "logit lens", "ALTI+", "rollout",
                 "weighted norms", "AOPC"):
        assert 0 < GLOSSARY[term].count(". ") + 1 <= 3, term  # one or two plain sentences
    assert set(page_terms()) and all(page_terms().values())
    from explorer.views.walkthrough_payload import CONTROL_TERMS

    assert all(definition(term) for term in CONTROL_TERMS)  # the walk's own controls explain themselves


@pytest.mark.parametrize("steps, chosen, expected", [(8, 1, 2), (8, 5, 4), (8, 3, 2), (2, 1, 1), (1, 1, 0)])
def test_the_walk_opens_on_a_step_with_at_least_three_keys(steps, chosen, expected):
    """The step the walk opens on (0-based) for a translation of `steps` pieces when the Steps view shows `chosen`
    (from 1): that step when its masked self-attention has 3 keys or more, else step 3, else the middle."""
    from types import SimpleNamespace

    from explorer.views.walkthrough import opening_step

    index, why = opening_step(SimpleNamespace(tgt_ids=list(range(steps))), chosen)
    assert index == expected and why
    assert ("keys to weigh" in why) == (chosen < 3 <= steps)


def test_stacks_of_two_shapes_walk_over_the_widest_each_showing_its_own(tokenizer_file):
    """A deep-encoder, shallow-decoder model with its own head counts: the pickers run over the widest stack, and a
    stack with fewer layers or heads shows (and names) its last, with its own widths in the text and the numbers."""
    from transformer.core.capture import capture_attention

    tokenizer = Tokenizer.load(tokenizer_file)
    config = tiny_config(tokenizer.vocab_size, d_model=16, n_layers=2, encoder_layers=3, decoder_layers=1,
                         encoder_heads=4, decoder_heads=2, encoder_ff=40, decoder_ff=24)
    torch.manual_seed(2)
    model = Transformer(config).eval()
    translation = Translator(model, tokenizer).translate(SENTENCE, strategy="greedy", max_length=4)
    token, step = 1, len(translation.tgt_ids) - 1
    walk = walkthrough(model, tokenizer, translation, token=token, step=step, layer=2, head=3)
    assert (walk.architecture["n_layers"], walk.architecture["n_heads"]) == (3, 4)
    src = torch.tensor([translation.src_ids])
    tgt = torch.tensor([[config.decoder_start_id] + translation.tgt_ids[:-1]])
    with torch.no_grad(), capture_attention(model) as att:
        model(src, tgt)
    for layer in range(3):
        for head in range(4):
            view = Layer(walk, layer, head)
            close(numbers(view, "encoder.encoder_self.softmax")["weights"], att.encoder_self[layer, 0, head, token])
            close(numbers(view, "decoder.cross.softmax")["weights"], att.cross[0, 0, min(head, 1), step])
    stage = next(s for s in walk.stages if s.key == "decoder.cross.softmax")
    assert f"Decoder {layer_label(0)} (its last)" in stage.title and head_label(1) in stage.title
    encoder_stage = next(s for s in walk.stages if s.key == "encoder.encoder_self.softmax")
    assert f"Encoder {layer_label(2)}" in encoder_stage.title and "its last" not in encoder_stage.title
    assert numbers(walk, "decoder.decoder_ff.hidden")["units"] == 24
    assert numbers(walk, "encoder.encoder_ff.hidden")["units"] == 40
    assert numbers(walk, "decoder.cross.scores")["d_k"] == 8
    assert numbers(walk, "encoder.encoder_self.scores")["d_k"] == 4
