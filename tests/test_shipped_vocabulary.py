"""The shipped joint vocabulary holds what people type: everyday words are whole pieces (the caption-only
vocabulary split "How" into single letters), in both languages, for both shipped models."""
import pytest

from transformer.tokenizer import Tokenizer

from .conftest import ROOT

EVERYDAY = {
    "en": ["How are you?", "Where is the train station?", "Thank you very much for your help.", "I love you."],
    "de": ["Wie geht es dir?", "Wo ist der Bahnhof?", "Ich liebe dich.", "Wie spät ist es?"],
}


@pytest.mark.parametrize("pair", ["en-de", "de-en"])
@pytest.mark.parametrize("language", ["en", "de"])
def test_everyday_words_are_whole_pieces(pair, language):
    tokenizer = Tokenizer.load(ROOT / "checkpoints" / pair / "spm.model")
    for sentence in EVERYDAY[language]:
        words = sentence[:-1].split()  # the final punctuation is a piece of its own
        # independent of how the sentence as a whole is cut: each word alone must be one piece, "▁" + the word
        assert [tokenizer.pieces(word) for word in words] == [["▁" + word] for word in words], sentence
        assert tokenizer.pieces(sentence) == ["▁" + word for word in words] + [sentence[-1]]
