"""The walk-through's words where a Hugging Face family computes otherwise than the paper (text.py holds the paper's):
T5's RMS norm, its scores without 1/sqrt(d_k) and with a relative position bias, its gated feed-forward; BART's and
mBART's norm on the embeddings; M2M100's and NLLB's sinusoids. Each entry is a variant of text.py's stage of that
name, `name.suffix`, as text.py's `variant` picks it from the model's config; (title, text, formula, why)."""

FAMILY_TEXTS = {
    "norm.rms": (
        "{where}, {sub}: RMS norm",
        "RMS norm divides the vector by its root mean square over its {d_model} features (no mean is subtracted and "
        "no bias added, as in T5), then applies a learned gain. This checkpoint normalises {placement}.",
        "RMS(x) = γ ⊙ x / √(mean(x²) + ε)",
        "It keeps the numbers in a steady range however many layers deep the vector is."),
    "final_norm.rms": (
        "{side}: final RMS norm",
        "A last RMS norm after the {side} stack: {goes}",
        "h = RMS(x_L)",
        "Pre-norm layers never normalise their sum, so the stack ends with one norm."),
    "positions.relative": (
        "{side}: no positional vector",
        "This model adds nothing for position {position}: the vector shown is zero. T5 tells attention where pieces "
        "sit by a learned bias per head and bucket of distance (key position − query position), added to every "
        "self-attention score of the stack.",
        "PE = 0;  s_ij = q_i · k_j + b_h(bucket(j − i))",
        "Order still matters to this model, through the scores rather than the vectors."),
    "input.normed": (
        "{side}: into the first layer",
        "The scaled embedding and the positional encoding are added feature by feature, then layer-normed (BART's "
        "and mBART's layernorm_embedding): this is what the first layer receives (dropout is off when translating).",
        "x₀ = LN(e × scale + PE)",
        "From here on the piece and its position travel as one vector."),
    "scores.unscaled": (
        "{where}, {head}: {kind} scores",
        "The query of “{query}” is compared with the key of every {keys_name} by a dot product. This model does not "
        "divide by √d_k: T5 folds that scale into how its weights were initialised.",
        "s_j = q · k_j",
        "A high score means this key answers what the query asks."),
    "scores.relative": (
        "{where}, {head}: {kind} scores",
        "The query of “{query}” is compared with the key of every {keys_name} by a dot product (T5 does not divide "
        "by √d_k), and the stack's learned relative position bias for this head and the two positions' distance "
        "is added.",
        "s_j = q · k_j + b_h(bucket(j − i))",
        "The bias is how this model knows order: near and far keys get their own learned boost."),
    "scores.causal.relative": (
        "{where}, {head}: scores and the causal mask",
        "The query of “{query}” scores the {keys} decoder input(s) so far, plus the decoder's learned relative "
        "position bias for this head and distance (T5 does not divide by √d_k). The causal mask sets the scores of "
        "later positions to −∞. The matrix has every step's row (row {position} is this step).",
        "s_ij = q_i · k_j + b_h(bucket(j − i)) + M_ij,  M_ij = 0 if j ≤ i else −∞",
        "The mask is why training on whole sentences at once teaches a model that writes one piece at a time."),
    "ff.hidden.gated": (
        "{where}: gated feed-forward hidden units",
        "Each position goes, on its own, through a gated network (T5 v1.1, FLAN-T5): the {activation} of one "
        "projection times a second projection, {d_model} → {d_ff}, then back to {d_model}. {after}",
        "h = {activation}(x W_gate) ⊙ (x W₁)",
        "The gate lets each unit decide how much of its linear part passes on."),
}

FAMILY_PHRASES = {
    "layout.fairseq": "sines in the first half of the features and cosines in the second, at fairseq's frequencies "
                      "(M2M100, NLLB)",
    # the first token reads the table's row `offset` (M2M100: pad_id + 1)
    "formula.fairseq": "PE[p, i] = sin((p − 1 + {offset}) · 10000^(−i/(d/2 − 1))) for i < d/2, cos(…) after",
}


def variant(name: str, config, key: str) -> str:
    """Stage text `name`, or its variant for the model's own arithmetic where family_text.py has one: T5's RMS norm,
    scores (with the relative bias in self-attention, `key` naming the stage's attention kind) and gated
    feed-forward, BART's embedding norm."""
    suffixes = []
    if config.norm_kind == "rms":
        suffixes.append("rms")
    if config.pos_encoding == "relative" and "cross" not in key.split("."):
        suffixes.append("relative")
    if not config.attention_scale:
        suffixes.append("unscaled")
    if config.gated_ff:
        suffixes.append("gated")
    if config.embedding_norm:
        suffixes.append("normed")
    return next((f"{name}.{suffix}" for suffix in suffixes if f"{name}.{suffix}" in FAMILY_TEXTS), name)
