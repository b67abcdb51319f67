"""The walk-through's words, apart from its numbers: every stage's title, text, formula and "why this matters" sentence,
keyed by stage name, and the package module each stage's numbers come from. Plain data, like explorer/glossary.py.

Texts are `str.format` templates: `{d_model}`, `{d_ff}`, `{n_heads}`, `{d_k}`, `{vocab}` and the like are facts read
from the checkpoint's config (stages.facts), `{query}`, `{position}` and the like are the sentence's own pieces and
positions (counted from 1, as the API counts them). The code that fills them only computes.
"""
from __future__ import annotations

from typing import NamedTuple

from .family_text import FAMILY_PHRASES, FAMILY_TEXTS


class StageText(NamedTuple):
    title: str
    text: str
    formula: str
    why: str  # one sentence a teacher can say: why this operation matters


# where each stage's numbers are computed: "path (names)"; tests/test_walkthrough.py checks every path and name
MODULES = {"text": "transformer/tokenizer.py (Tokenizer.encode)",
           "embed": "transformer/core/model.py (TokenEmbedding, Transformer.embed)",
           "positions": "transformer/core/positions.py (SinusoidalPositions, LearnedPositions, NoPositions)",
           "norm": "transformer/core/layers.py (Residual)",
           "projections": "transformer/core/attention.py (MultiHeadAttention.project_self, project_queries)",
           "attention": "transformer/core/attention.py (explicit_attention)",
           "mask": "transformer/core/model.py (padding_mask, causal_mask)",
           "heads": "transformer/core/attention.py (MultiHeadAttention.attend_to)",
           "residual": "transformer/core/layers.py (Residual)",
           "ff": "transformer/core/layers.py (FeedForward)",
           "layers": "transformer/core/layers.py (EncoderLayer, DecoderLayer)",
           "final_norm": "transformer/core/model.py (encoder_norm, decoder_norm)",
           "decoder_inputs": "transformer/decoding/step_decoder.py (StepDecoder)",
           "output": "transformer/core/model.py (Transformer.decode, generator)",
           "softmax": "transformer/decoding/step_decoder.py (forbid_never_produced)",
           "choose": "transformer/decoding/strategies/"}

# the attention kinds as the titles and texts name them
KIND_NAMES = {"encoder_self": "Self-attention", "decoder_self": "Masked self-attention", "cross": "Cross-attention"}
KIND_TERMS = {"encoder_self": "encoder self-attention", "decoder_self": "masked self-attention",
              "cross": "cross-attention"}
KEYS_FROM = {"encoder_self": "every source piece's vector",
             "decoder_self": "every decoder input so far",
             "cross": "the encoder's output (the memory), one vector per source piece"}
LAYER_COLUMNS = {"encoder_self": "‖self-attention added‖", "decoder_self": "‖masked self-attn added‖",
                 "cross": "‖cross-attention added‖", "encoder_ff": "‖feed-forward added‖",
                 "decoder_ff": "‖feed-forward added‖"}
ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU (tanh)", "swish": "Swish", "silu": "SiLU"}
STRATEGY_TEXT = {
    "greedy": ("Greedy decoding takes the most probable piece.", "next = argmax_i p_i"),
    "beam": ("Beam search keeps the {beam_size} best partial translations (by the sum of their log-probabilities, "
             "divided by a length penalty) and extends each; the piece here is the one on the winning hypothesis.",
             "score = Σ log p / ((5 + length) / 6)^α"),
    "sample": ("Sampling draws a piece at random from the probabilities after temperature {temperature}, top-k {top_k} "
               "and top-p {top_p}.", "next ~ p (filtered)"),
}

TEXTS: dict[str, StageText] = {
    "text.pieces": StageText(
        "Text to ids",
        "The tokenizer cuts the sentence into pieces from its fixed vocabulary of {vocab} pieces and looks up each "
        "piece's id. “▁” marks a piece that starts a new word (it stands for the space before it); a piece without "
        "it continues the word before. </s> closes the sentence.{unknown}{bytes}",
        "sentence → pieces → ids",
        "The model never sees letters: everything after this works on these ids."),
    "text.symbols": StageText(
        "Text to ids",
        "The tokenizer reads the input as symbols from its fixed vocabulary of {vocab} pieces, one piece per symbol "
        "(written apart by spaces here), and looks up each piece's id. A symbol outside the vocabulary becomes "
        "<unk>. </s> closes the sequence.{unknown}",
        "symbols → pieces → ids",
        "The model never sees the symbols themselves: everything after this works on these ids."),
    "embedding": StageText(
        "{side}: embedding row",
        "The id of “{piece}” at position {position} picks one row of the embedding matrix ({rows} rows × {d_model} "
        "numbers): the piece's learned vector.{tied}",
        "e = E[id]",
        "Similar pieces get similar rows in training, so meaning starts here as a direction in {d_model} numbers."),
    "scaled": StageText(
        "{side}: scaled embedding",
        "The row is multiplied by {scale}{root}: the embeddings were initialised small (about 1/√d_model), and the "
        "scaling brings them to the size of the positional encoding, so the position does not drown the piece.",
        "x = e × √d_model",
        "Without the scale, where a piece sits would speak louder than what it is."),
    "scaled.none": StageText(
        "{side}: scaled embedding",
        "This checkpoint does not scale its embeddings (it was trained without the paper's × √d_model): the row goes "
        "on as it is.",
        "x = e",
        "Whether to scale is a training choice; the model learned its sizes either way."),
    "positions.sinusoidal": StageText(
        "{side}: positional encoding",
        "Position {position} gets a fixed vector: {layout}, each frequency lower than the one before, so every "
        "position has its own pattern and nearby positions have similar ones.",
        "{formula}",
        "Attention itself ignores order; this vector is the only way the model knows where a piece sits."),
    "positions.learned": StageText(
        "{side}: positional encoding",
        "Position {position} gets its row of a learned table: this checkpoint learned its positional vectors in "
        "training instead of using the paper's sines and cosines.",
        "PE = P[p] (a learned table, row p)",
        "Attention itself ignores order; this vector is the only way the model knows where a piece sits."),
    "input": StageText(
        "{side}: into the first layer",
        "The scaled embedding and the positional encoding are added feature by feature (one colour scale for the "
        "three): this sum is what the first layer receives (dropout is off when translating).",
        "x₀ = e × √d_model + PE",
        "From here on the piece and its position travel as one vector."),
    "norm": StageText(
        "{where}, {sub}: layer norm",
        "Layer norm rescales the vector to mean 0 and variance 1 over its {d_model} features, then applies a learned "
        "gain and bias. This checkpoint normalises {placement}.",
        "LN(x) = γ ⊙ (x − mean(x)) / √(var(x) + ε) + β",
        "It keeps the numbers in a steady range however many layers deep the vector is."),
    "qkv": StageText(
        "{where}, {head}: {kind} query, key, value",
        "Three learned projections map the vector of “{query}” to a query, a key and a value for each of the "
        "{n_heads} heads ({d_k} numbers each). The query asks, the keys of {keys_from} answer, and the values are "
        "what gets passed on. Shown beside the query: {shown_why}",
        "q = x W_Q + b_Q,  k_j = x_j W_K + b_K,  v_j = x_j W_V + b_V",
        "Asking, answering and passing on are three different jobs, so each gets its own projection."),
    "scores": StageText(
        "{where}, {head}: {kind} scores",
        "The query of “{query}” is compared with the key of every {keys_name} by a dot product, divided by "
        "√d_k = √{d_k} so the scores do not grow with the head size.",
        "s_j = q · k_j / √d_k",
        "A high score means this key answers what the query asks."),
    "scores.causal": StageText(
        "{where}, {head}: scores and the causal mask",
        "The query of “{query}” scores the {keys} decoder input(s) so far. Every decoder position does the same, and "
        "the causal mask sets the scores of later positions to −∞: a position may not look at what comes after it, "
        "since at decoding time it does not exist yet. The matrix has every step's row (row {position} is this "
        "step).",
        "s_ij = q_i · k_j / √d_k + M_ij,  M_ij = 0 if j ≤ i else −∞",
        "The mask is why training on whole sentences at once teaches a model that writes one piece at a time."),
    "mask": StageText(
        "{where}, {head}: padding mask",
        "Padding (filler added to make sentences in a batch the same length) must never be attended to: its scores "
        "are set to −∞. A sentence translated alone has no padding, so every key stays.",
        "s_j ← s_j + M_j,  M_j = 0 for a real piece, −∞ for padding",
        "Without it a batch would translate differently from the same sentence alone."),
    "softmax": StageText(
        "{where}, {head}: softmax",
        "The softmax turns the scores into weights between 0 and 1 that sum to 1: how much of each value this head "
        "passes on to “{query}”.",
        "α_j = e^(s_j) / Σ_j' e^(s_j')",
        "These weights are the attention pictures the rest of the explorer draws."),
    "softmax.causal": StageText(
        "{where}, {head}: softmax over the visible prefix",
        "The softmax turns each row of scores into weights that sum to 1; e^−∞ = 0, so every masked entry gets "
        "weight exactly 0. Row {position} is this step's query.",
        "α_ij = e^(s_ij) / Σ_j' e^(s_ij')",
        "A weight of exactly 0 is the guarantee that the future is never read."),
    "weighted_sum": StageText(
        "{where}, {head}: weighted sum of the values",
        "This head's output for “{query}” is the values added up with those weights.",
        "head = Σ_j α_j v_j",
        "This is the information that actually moves from one position to another."),
    "concat": StageText(
        "{where}: heads concatenated",
        "All {n_heads} heads ran the same steps with their own projections; their outputs ({d_k} numbers each) are "
        "laid side by side into one vector of {d_model}: head h's part is features (h − 1)·{d_k} + 1 to h·{d_k}.",
        "concat = [head₁; head₂; …; head_H]",
        "Several heads can look for different things at once; here they are put back together."),
    "output_projection": StageText(
        "{where}: output projection W_O",
        "One more learned matrix ({d_model} × {d_model}) mixes the heads' outputs back into the model's space: this "
        "is what the attention sub-layer adds.",
        "out = concat W_O + b_O",
        "It lets the heads' findings combine before they join the residual stream."),
    "residual": StageText(
        "{where}, {sub}: residual add",
        "The sub-layer's output is added to its input (one colour scale for the three): the {what} only adds to the "
        "vector (the residual stream) instead of replacing it, which keeps the piece's identity and lets training "
        "reach deep layers.",
        "{formula}",
        "Every layer writes into one shared vector; nothing is thrown away."),
    "ff.hidden": StageText(
        "{where}: feed-forward hidden units",
        "Each position then goes, on its own, through a two-layer network: {d_model} → {d_ff} → {d_model}. {after}",
        "h = {activation}(x W₁ + b₁)",
        "Attention moves information between positions; this is where each position computes on what it gathered."),
    "ff.output": StageText(
        "{where}: feed-forward back to d_model",
        "The second matrix maps the {d_ff} hidden units back to the model's width: what the feed-forward block adds.",
        "out = h W₂ + b₂",
        "Its output is added to the residual stream like attention's."),
    "layers": StageText(
        "All {n_layers} {side} layers",
        "Every {side} layer repeats the same operations with its own weights. The table follows “{piece}”'s vector "
        "through them: its size going in, how much each sub-layer added, and its size coming out. Pick a layer above "
        "the walk to see any of them in full.",
        "x_(l+1) = layer_l(x_l)",
        "Depth lets later layers build on what earlier ones found."),
    "final_norm": StageText(
        "{side}: final layer norm",
        "A last layer norm after the {side} stack: {goes}",
        "h = LN(x_L)",
        "Pre-norm layers never normalise their sum, so the stack ends with one norm."),
    "decoder.inputs": StageText(
        "Decoder inputs so far",
        "The decoder starts from <s> and is fed back each piece it produced. At step {step} its inputs are these "
        "{step}; the last one, “{piece}”, is where the next piece is predicted.",
        "inputs = <s>, y₁, …, y_(t−1)",
        "Translation is written one piece at a time, each step reading everything written so far."),
    "output.projection": StageText(
        "Output projection: logits",
        "One score (logit) per piece of the target vocabulary ({vocab} pieces): the dot product of the final vector "
        "with each piece's output row, plus a bias. {tied}",
        "logits = h Wᵀ + b{tied_formula}",
        "Every possible next piece gets a score; the translation is a choice among all of them."),
    "output.softmax": StageText(
        "Softmax: next-piece probabilities",
        "The softmax turns the logits into probabilities that sum to 1. Padding and the start token are never "
        "produced, so their probability is set to 0 first. “{piece}” is ranked {rank}. Move temperature, top-k and "
        "top-p: the browser recomputes the distribution over all {vocab} pieces from this step's logits.",
        "p_i = e^(logit_i / T) / Σ_j e^(logit_j / T), then top-k and top-p filter and renormalise",
        "Temperature and the filters change only the choice, never the model's scores."),
    "output.choice": StageText(
        "Choosing the piece",
        "{how} {greedy_would} “{top}”; this translation ({strategy}) took “{chosen}”. {fed}",
        "{formula}",
        "The decoding strategy, not the model, decides between close candidates."),
}


# the parts of a text that depend on the sentence or the checkpoint, filled into TEXTS by the stage builders
PHRASES = {
    "unknown.some": " {count} piece(s) are not in the vocabulary and become <unk> (id {unk}).",
    "unknown.none": " A piece the vocabulary lacks would become <unk> (id {unk}); this sentence has none.",
    "bytes.some": " {count} piece(s) like {first} are single bytes: a character the vocabulary lacks is spelled out "
                  "in its UTF-8 bytes.",
    "bytes.fallback": " This tokenizer spells a character its vocabulary lacks in UTF-8 bytes.",
    "bytes.none": "",
    "shared_embeddings": " The source and target share one embedding matrix.",
    "root": " = √d_model = √{d_model}",
    "layout.halves": "sines in the first half of the features and cosines in the second",
    "layout.interleaved": "sines in the even features and cosines in the odd ones",
    # positions are counted from 1 on the page and in the API: the paper's pos (from 0) is position − 1
    "formula.halves": "PE[p, i] = sin((p − 1) / 10000^(2i/d)) for i < d/2, cos(…) after",
    "formula.interleaved": "PE[p, 2i] = sin((p − 1) / 10000^(2i/d)), PE[p, 2i+1] = cos((p − 1) / 10000^(2i/d))",
    "shown.cross": "the key and value of “{piece}” (source piece {number}), the piece this head weighs most for "
                   "“{query}” (weight {weight}).",
    "shown.self": "the key and value of “{query}” itself (position {number}).",
    "placement.pre": "before the sub-layer (pre-norm: the sub-layer reads the normalised vector, the residual keeps "
                     "the raw one)",
    "placement.post": "after the residual add (post-norm, as in the original paper)",
    "what.ff": "feed-forward block",
    "what.attention": "attention",
    "residual.pre": "x ← x + sublayer(x)",
    "residual.post": "x ← x + sublayer(x), then layer norm",
    "after.relu": "After the ReLU, negative units are 0: {firing} of {d_ff} units fire for this piece.",
    "after.other": "After the {name}, {firing} of {d_ff} units are above 0 for this piece.",
    "goes.encoder": "its output is the memory the decoder's cross-attention reads.",
    "goes.decoder": "its output goes to the output projection.",
    "output.tied": "This checkpoint ties the output projection to the target embedding: the same matrix that turned "
                   "ids into vectors turns the vector back into scores.",
    "output.untied": "This checkpoint learned a separate output matrix.",
    "tied_formula": "  (W = E, tied)",
    "fed.end": "It is </s>: the translation ends here.",
    "fed.next": "“{piece}” is fed back as the decoder input of step {step}, and the next step begins.",
    "greedy.other": "Greedy would take",
    "greedy.same": "It takes",
    "strategy.other": "The {strategy} strategy picks a piece from these probabilities.",
}


TEXTS |= {name: StageText(*words) for name, words in FAMILY_TEXTS.items()}
PHRASES |= FAMILY_PHRASES


def phrase(key: str, **facts) -> str:
    return PHRASES[key].format(**facts)


# "predict first": what a stage asks the room before it shows its answer (the piece its softmax ranks first)
ASK = {"softmax": "Before the numbers: which key will this head weigh most for “{query}”?",
       "softmax.causal": "Before the numbers: which of the decoder inputs so far will this head weigh most for "
                         "“{query}”?",
       "output.softmax": "Before the numbers: which piece will the model rank first for step {step}?"}


def stage_ask(name: str, **facts) -> str:
    return ASK[name].format(**facts) if name in ASK else ""


def stage_text(name: str, **facts) -> StageText:
    """The stage `name`'s words with `facts` filled in."""
    words = TEXTS[name]
    return StageText(*(part.format(**facts) for part in words))
