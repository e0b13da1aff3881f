"""BERT's uncased WordPiece tokenizer, written from its two published steps, over a vocab.txt.

0. The special tokens ([PAD], [UNK], [CLS], [SEP], [MASK], those in the vocabulary) written
   literally in the text, exactly and case-sensitively, are their own ids; the text between
   them goes through steps 1-2 (the fast tokenizer's added tokens, ``normalized: false``).
1. Basic tokenisation: drop NUL, U+FFFD and control, format, private-use and surrogate
   characters (Cc, Cf, Co, Cs; unassigned ones stay, as in the fast tokenizer, and make their
   word ``[UNK]``), turn every white-space character into a space, put
   spaces around CJK ideographs, lower-case each character on its own (no final-sigma rule:
   "ΗΣ" -> "ησ"), strip accents (NFD, drop combining marks), split on white space and on every
   punctuation character (ASCII 33-47, 58-64, 91-96, 123-126 and the Unicode P* categories),
   each one its own token.
2. WordPiece: greedy longest match from the left in the vocabulary, continuation pieces
   prefixed ``##``; a word with no full segmentation, or longer than 100 characters, is
   ``[UNK]``.

``encode`` adds ``[CLS]`` ... ``[SEP]`` and truncates to ``max_length`` (the sentence-BERT
config's ``max_seq_length``, 256 for all-MiniLM-L6-v2), as the encoder saw in training.
The ids match the Hugging Face fast tokenizer of the same vocab on the fixture sentences
(tests/data/minilm_reference.npz, written by that tokenizer) and on "x" + c + "y" + upper(c)
for every code point c but 759: 503 whose category differs between Python's Unicode 14 tables
and the fast tokenizer's older ones (characters added since), and U+2B820-2B91F, which the
fast tokenizer's CJK ranges leave out (a typo there: 0x2B920).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

MAX_WORD_CHARS = 100
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _clean(text: str) -> str:
    out = []
    for ch in text:
        cp = ord(ch)
        if cp in (0, 0xFFFD):
            continue
        if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs"):
            continue
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    return "".join(out)


def basic_tokens(text: str) -> list[str]:
    """Step 1: lower-cased, accent-stripped words and single punctuation characters."""
    words = []
    for word in "".join(ch.lower() for ch in _clean(text)).split():
        word = "".join(
            c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn"
        )
        current = ""
        for ch in word:
            if _is_punctuation(ch):
                if current:
                    words.append(current)
                words.append(ch)
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    return words


class WordPiece:
    """The tokenizer of one vocabulary file (one token per line, id = line number)."""

    def __init__(self, vocab_file: str | Path, max_length: int = 256) -> None:
        path = Path(vocab_file)
        tokens = path.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.tokens = tokens
        for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
            if special not in self.vocab:
                raise ValueError(f"{path}: vocabulary has no {special} token")
        if max_length < 3:
            raise ValueError(f"max_length must be >= 3 ([CLS], one token, [SEP]), got {max_length}")
        self.max_length = max_length
        self.pad, self.unk = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
        specials = [t for t in SPECIALS if t in self.vocab]
        self._specials = re.compile("(" + "|".join(map(re.escape, specials)) + ")")

    def word_pieces(self, word: str) -> list[int]:
        """Step 2 for one basic token."""
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return pieces

    def encode(self, text: str) -> list[int]:
        """``[CLS]`` ids ``[SEP]``, truncated to ``max_length``."""
        if not isinstance(text, str):
            raise TypeError(f"expected a string, got {type(text).__name__}")
        ids = []
        for k, part in enumerate(self._specials.split(text)):
            if k % 2:  # the split's captured separators: a special token's text
                ids.append(self.vocab[part])
            else:
                ids += [i for word in basic_tokens(part) for i in self.word_pieces(word)]
        return [self.cls, *ids[: self.max_length - 2], self.sep]

    def batch(self, texts: list[str]) -> tuple[list[list[int]], int]:
        """Every text's ids and the longest length (the padded width)."""
        ids = [self.encode(t) for t in texts]
        return ids, max((len(i) for i in ids), default=0)
