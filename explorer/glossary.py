"""Every term the page uses, in one or two plain sentences: the one source of the explanations the page shows as info
marks where a term appears, as one list (the Glossary tab), and that docs are written from. Plain data: importable
without Gradio or torch."""
from __future__ import annotations

GLOSSARY: dict[str, str] = {
    # text and tokens
    "piece": "A unit of text the model reads or writes: a whole word, part of a word, or a punctuation mark. The "
             "tokenizer cuts every sentence into pieces from a fixed vocabulary learned from the training data.",
    "▁": "The mark SentencePiece puts at the start of a piece that begins a new word; it stands for the space before "
         "it. A piece without it continues the word before.",
    "id": "A piece's number in the vocabulary: the model sees ids, never letters.",
    "vocabulary": "The fixed list of pieces the tokenizer knows; every id is a position in it.",
    "<unk>": "The piece used for anything the vocabulary cannot spell. A tokenizer with byte fallback spells unknown "
             "characters in bytes instead, so there it is rare.",
    "byte piece": "A piece like <0xCE>: one UTF-8 byte, used to spell a character the vocabulary lacks.",
    "<s>": "The start symbol: the decoder's first input, before it has produced anything.",
    "</s>": "The end symbol: it closes the source sentence, and the translation ends when the decoder produces it.",
    "<pad>": "Padding: filler that makes sentences in one batch the same length. It is masked out and never produced.",
    "word": "Pieces joined back into the word they spell (the pieces after one that starts with ▁).",
    # the model
    "embedding": "A learned vector per vocabulary piece: row i of the embedding matrix is the vector of id i.",
    "d_model": "The width of every vector inside the model (the embedding size); the walk-through's stages give the "
               "model's own.",
    "positional encoding": "A vector added to each embedding that says where the piece sits in the sentence: the "
                           "paper's fixed sines and cosines, or a learned table.",
    "layer": "One block of the encoder or decoder: attention, then a feed-forward network, each with a residual add "
             "and a layer norm. The model stacks several with the same shape and their own weights.",
    "head": "One of the parallel attentions inside a layer: each has its own query, key and value projections and can "
            "look for something different; their outputs are concatenated.",
    "query": "The vector a position uses to ask what to look at: its dot product with every key gives the scores.",
    "key": "The vector a position offers to be found by: compared with a query, it says how relevant that position "
           "is.",
    "value": "The vector a position passes on when it is attended to: the attention output is the values weighted "
             "by the attention weights.",
    "query/key/value": "The three projections of each position's vector in attention: the query asks, the keys answer "
                       "with scores, and the values are what gets mixed by the resulting weights.",
    "score": "A query's dot product with a key, divided by √d_k: before the softmax, any real number.",
    "d_k": "The size of one head's query and key vectors (d_model divided by the number of heads).",
    "softmax": "Turns a list of scores into positive weights that sum to 1: e^score divided by the sum of all e^score.",
    "attention weight": "How much of a key position's value one query takes, after the softmax: each row sums to 1.",
    "attention": "The operation that lets each position gather information from other positions, weighting them by "
                 "how well its query matches their keys.",
    "encoder": "The half of the model that reads the whole source sentence at once and turns every piece into a "
               "vector that knows its context.",
    "decoder": "The half that writes the translation one piece at a time, reading its own output so far and the "
               "encoder's vectors.",
    "encoder self-attention": "Attention among the source pieces: every source piece may look at every other one.",
    "masked self-attention": "The decoder's attention over its own inputs, where each position may only look at "
                             "itself and earlier positions (the causal mask), because later ones do not exist yet "
                             "when it is computed.",
    "decoder self-attention": "The same as masked self-attention: the decoder attending to its own inputs so far.",
    "cross-attention": "The decoder's attention to the source: queries come from the decoder, keys and values from "
                       "the encoder's output. It is where the translation looks at the sentence it translates.",
    "causal mask": "Sets the scores of later positions to −∞ in the decoder's self-attention, so after the softmax "
                   "they get weight exactly 0.",
    "padding mask": "Sets the scores of padding positions to −∞, so no query attends to filler.",
    "W_O": "The output projection of an attention sub-layer: it mixes the concatenated heads back into d_model "
           "numbers.",
    "residual stream": "The running vector of each position: every sub-layer adds its output to it instead of "
                       "replacing it.",
    "layer norm": "Rescales a vector to mean 0 and variance 1 over its features, then applies a learned gain and "
                  "bias; it keeps the numbers in a stable range.",
    "pre-norm": "Layer norm before each sub-layer (x + f(LN(x))): trains stably without warm-up tricks.",
    "post-norm": "Layer norm after the residual add (LN(x + f(x))), as in the original Transformer paper.",
    "feed-forward": "A two-layer network applied to each position on its own, widening to d_ff units and back.",
    "ReLU": "The activation max(0, x): negative units become 0 (they do not fire).",
    "logit": "The unnormalised score the output projection gives each vocabulary piece; the softmax turns logits "
             "into probabilities.",
    "tied embeddings": "The output projection reuses the target embedding matrix, so the same vectors turn ids into "
                       "vectors and vectors back into scores.",
    "probability": "The share the model gives a piece as the next one, after the softmax: all pieces' probabilities "
                   "sum to 1.",
    # decoding
    "decoding step": "One pass of the decoder that produces one piece; the step's piece is fed back as the next "
                     "input.",
    "greedy": "Decoding that always takes the most probable next piece.",
    "beam": "Beam search: keeps the few best partial translations (the beam) at each step, extends each, and returns "
            "the best finished one.",
    "beam size": "How many partial translations beam search keeps at each step.",
    "length penalty": "Divides a beam hypothesis's log-probability by ((5 + length) / 6)^α, so that longer "
                      "translations are not unfairly penalised for having more pieces.",
    "sampling": "Decoding that draws the next piece at random according to its probability.",
    "temperature": "Divides the logits before the softmax: below 1 sharpens the distribution, above 1 flattens it.",
    "top-k": "Sampling only among the k most probable pieces.",
    "top-p": "Sampling only among the most probable pieces whose probabilities add up to p (nucleus sampling).",
    "layer picker": "The walk-through's own Layer and Head lists: they choose which layer and head its stages show, "
                    "and change them in place, keeping the stage.",
    "pin": "Pin a head in the walk-through to keep it on screen, then pick another: the two are drawn side by side "
           "on every stage of one head.",
    "predict first": "A classroom mode of the walk-through: before a softmax shows its answer, the walk asks the room "
                     "to guess, then reveals it.",
    "search tree": "Every expansion a search made: which candidates were kept, finished or pruned at each step.",
    "forced start": "A prefix the translation must begin with; the model continues from it (a what-if).",
    "heads switched off": "Heads whose output is replaced by zeros (head masking), to see what the translation does "
                          "without them.",
    # analyses
    "logit lens": "Applies the final norm and output projection to every decoder layer's output, to read what each "
                  "layer would predict if it were the last.",
    "attribution": "How much each input piece contributed to a prediction, measured by one of several methods.",
    "input x gradient": "An attribution: the gradient of the prediction with respect to each input embedding, "
                        "multiplied by that embedding.",
    "contrastive": "Explains why the model chose one piece rather than another (the foil), by attributing the "
                   "difference of their log-probabilities.",
    "ALTI+": "Aggregation of Layer-wise Token-to-token Interactions (Ferrando et al., 2022): how much of each "
             "prediction came from each source piece and each earlier output piece, traced through every layer.",
    "ALTI-Logit": "ALTI+'s reading of a contrast: each input's share of the log-odds between the chosen piece and the "
                  "foil, through the layers.",
    "rollout": "Attention rollout (Abnar and Zuidema, 2020): the attention of every layer multiplied together, with "
               "the residual added, to estimate how information flows from the inputs through all the layers.",
    "weighted norms": "Norm-based attention (Kobayashi et al., 2020): each weight times the size of what that key's "
                      "value actually moves, ‖α·f(x)‖, instead of the weight alone.",
    "AOPC": "Area over the perturbation curve: how fast the model's confidence drops as the inputs an attribution "
            "ranks highest are removed; larger means a more faithful attribution.",
    "faithfulness": "Whether an explanation reflects what the model really used, tested by removing what it ranks "
                    "highest and measuring the effect.",
    "head importance": "How much the validation BLEU drops when one head is switched off alone.",
    "alignment": "Which source piece each output piece translates; read off cross-attention heads and compared with "
                 "a word aligner.",
    "AER": "Alignment error rate: how far alignments read from attention are from reference alignments (lower is "
           "better).",
    "BLEU": "A standard translation score: how many word sequences of the output also occur in a reference "
            "translation (0 to 100).",
    "entropy": "How spread out a distribution is: 0 when all weight is on one piece, higher when it is spread.",
    "confidence": "The probability the model gave the piece it chose.",
    # causes (the patching analyses)
    "activation patching": "Run the model on a corrupted input, put one internal value back from the run on the "
                           "clean input, and measure how much of the clean prediction returns: a causal test, where "
                           "attention weights and gradients are correlations.",
    "causal tracing": "Activation patching of every layer and source position in turn (Meng et al., 2022): which "
                      "encoder position, after which layer, carries what makes the word.",
    "restored share": "(p patched − p corrupted) / (p clean − p corrupted) of the target piece: 1 when the patch "
                      "brings the clean prediction back entirely, 0 when it changes nothing.",
    "attribution patching": "A first-order estimate of activation patching from one forward and one backward pass: "
                            "the gradient at the corrupted run times the clean-minus-corrupted difference (Nanda, "
                            "2023).",
    "logit difference": "The target piece's logit minus a contrast piece's (logit(target) − logit(contrast)): how "
                        "strongly the model prefers one piece to the other, before the softmax.",
    "head patching": "Activation patching of one attention head's output at a time: which head moves what makes the "
                     "word.",
    "path patching": "Activation patching of one path only: here, the clean encoder output as one cross-attention "
                     "head reads it (its keys and values), everything else left corrupted.",
    # dictionary features (transformer/features, docs/features.md)
    "sparse autoencoder": "A dictionary of many directions learned for one point of the model, of which each token "
                          "uses only a few: the token's vector is rebuilt as a sum of those directions.",
    "latent": "One direction of a sparse autoencoder, also called a feature: its activation says how much of it a "
              "token's vector holds. Most latents are zero on most tokens.",
    "TopK": "The sparse autoencoder's rule for sparsity: each token keeps its k largest latent activations and sets "
            "the rest to zero.",
    "fraction of variance unexplained": "How much of the vectors' spread a reconstruction misses: the squared error "
                                        "divided by the squared distance from the mean. 0 is perfect.",
    "steering": "Changing a translation by editing a latent inside the model, removing it or scaling it, and "
                "decoding again.",
}


def definition(term: str) -> str | None:
    """The term's text, matching case-insensitively."""
    if term in GLOSSARY:
        return GLOSSARY[term]
    lowered = {key.lower(): text for key, text in GLOSSARY.items()}
    return lowered.get(term.lower())


__all__ = ["GLOSSARY", "definition"]


# the terms marked where they appear on the page (tab names, component labels): an info mark whose title is the text
PAGE_TERMS = ("ALTI+", "logit lens", "weighted norms", "rollout", "AOPC", "cross-attention", "self-attention",
              "length penalty", "beam", "head", "layer", "piece", "attribution", "search tree", "positional encoding",
              "query", "temperature", "top-k", "top-p", "BLEU", "AER", "entropy", "faithfulness",
              "activation patching", "attribution patching", "causal tracing", "logit difference")


def page_terms() -> dict[str, str]:
    """{term: text} for the info marks the page adds to its labels (page.py's GLOSSARY_MARKS_JS)."""
    out = {}
    for term in PAGE_TERMS:
        text = definition(term) or definition(f"encoder {term}") or definition(f"{term} size")
        if text:
            out[term] = text
    return out
