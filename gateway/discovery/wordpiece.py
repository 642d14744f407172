"""BERT's uncased tokenizer (basic tokenizer + greedy WordPiece), for the local encoder (:mod:`.minilm`).

It gives the ids Hugging Face's ``BertTokenizer`` (the ``tokenizers`` one that sentence-transformers
uses for all-MiniLM-L6-v2: ``tokenizer.json``'s ``BertNormalizer`` with ``lowercase``,
``strip_accents`` following it, ``clean_text`` and ``handle_chinese_chars``; ``BertPreTokenizer``;
``WordPiece`` with ``##`` and 100 characters per word at most) gives, checked against it on the texts
of ``tests/data/discovery/minilm-reference.json``:

* the special tokens (``[PAD] [UNK] [CLS] [SEP] [MASK]``) written in a text, exactly so (case and
  all), are those tokens, as added tokens are;
* each remaining piece: NUL, U+FFFD and control/format/unassigned/private characters (other than
  tab, CR, LF) are dropped, whitespace becomes a space; CJK ideographs are words of their own;
  NFD, then combining marks (Mn) are dropped; lower-cased;
* split on whitespace, and every punctuation character (ASCII punctuation, which counts ``$ + < = >
  ^ ` | ~``, and Unicode's P* categories) is a word of its own;
* each word: the longest vocabulary prefix, then the longest ``##`` continuation, and so on; a word
  that cannot be covered so, or has over 100 characters, is one ``[UNK]``;
* ``[CLS] ... [SEP]``, truncated to ``max_length`` ids in all (the pieces at the end are dropped).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

__all__ = ["WordPiece"]

_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in _SPECIAL) + ")")
_MAX_WORD_CHARS = 100
# The CJK Unified Ideographs blocks BERT treats as words of their own (not kana, not hangul), as
# ``tokenizers`` writes them: from 0x2B920, not 0x2B820, in the sixth.
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co"})  # not Cn: an unassigned character is kept


_ASCII_PUNCT = frozenset(chr(c) for c in (*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127)))
# ASCII: controls dropped, tab/CR/LF a space, punctuation a word of its own, letters lower-cased.
_ASCII = str.maketrans({**{chr(c): None for c in (*range(0, 32), 127)}, "\t": " ", "\n": " ", "\r": " ",
                        **{p: f" {p} " for p in _ASCII_PUNCT}})


@lru_cache(maxsize=8192)
def _clean(ch: str) -> str:
    """One character after BERT's clean-up and CJK spacing: "" (dropped), " ", " X " or itself."""
    if ch in "\t\n\r":
        return " "
    code = ord(ch)
    if code == 0 or code == 0xFFFD or unicodedata.category(ch) in _DROP_CATEGORIES:
        return ""
    if ch.isspace():
        return " "
    if any(lo <= code <= hi for lo, hi in _CJK):
        return f" {ch} "
    return ch


@lru_cache(maxsize=8192)
def _split(ch: str) -> str:
    """One character of the normalised text as the pre-tokenizer sees it: punctuation spaced."""
    return f" {ch} " if ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P") else ch


def _words(text: str) -> list[str]:
    """The words of *text* (no special token in it), in BERT's order: clean-up, CJK spacing, NFD
    without combining marks, lower case; then split on whitespace and around punctuation."""
    if text.isascii():
        return text.translate(_ASCII).lower().split()
    cleaned = "".join(_clean(ch) for ch in text)
    stripped = "".join(c for c in unicodedata.normalize("NFD", cleaned) if unicodedata.category(c) != "Mn")
    # Character by character, as tokenizers lower-cases: str.lower() would make a word-final Σ ς.
    return "".join(_split(ch) for ch in stripped.replace("Σ", "σ").lower()).split()


class WordPiece:
    """The tokenizer of one ``vocab.txt`` (one token a line; the line number is its id)."""

    def __init__(self, vocab: dict[str, int], max_length: int = 256) -> None:
        if max_length < 2:
            raise ValueError("max_length must leave room for [CLS] and [SEP]")
        self.vocab = vocab
        self.max_length = max_length
        self.unk, self.cls, self.sep, self.pad = (vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"))
        self._special = {s: vocab[s] for s in _SPECIAL}
        self._longest = max(len(t) for t in vocab)
        self._words: dict[str, list[int]] = {}  # word → its ids (a bounded cache: tool texts repeat words)

    @classmethod
    def load(cls, path: str | Path, max_length: int = 256) -> WordPiece:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        vocab: dict[str, int] = {}
        for i, token in enumerate(lines):
            vocab.setdefault(token.rstrip("\r"), i)
        return cls(vocab, max_length)

    def encode(self, text: str) -> list[int]:
        """``[CLS]`` + the text's ids + ``[SEP]``, at most ``max_length`` in all."""
        budget = self.max_length - 2
        ids: list[int] = []
        for piece in _SPECIAL_RE.split(text):
            if not piece:
                continue
            special = self._special.get(piece)
            if special is not None:
                ids.append(special)
            else:
                for word in _words(piece):
                    ids += self._word(word)
                    if len(ids) >= budget:
                        break
            if len(ids) >= budget:
                break
        return [self.cls, *ids[:budget], self.sep]

    def encode_all(self, texts: Iterable[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def _word(self, word: str) -> list[int]:
        cached = self._words.get(word)
        if cached is not None:
            return cached
        ids = self._pieces(word)
        if len(self._words) >= 65536:
            self._words.clear()
        self._words[word] = ids
        return ids

    def _pieces(self, word: str) -> list[int]:
        if len(word) > _MAX_WORD_CHARS:
            return [self.unk]
        vocab, ids, start, n = self.vocab, [], 0, len(word)
        while start < n:
            end = min(n, start + self._longest)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                token = vocab.get(piece)
                if token is not None:
                    ids.append(token)
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return ids
