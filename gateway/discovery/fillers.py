"""Words and frames that ask nothing: stop words, "details"-like words, "how do I ..." frames.

What a query asks for is in its other words; these only shape it. The reading verbs that do not say
one or many ("get", "retrieve", "fetch") are stop words here and set the intent elsewhere
(:mod:`.intent`); "details"/"info" hint at one item (:data:`ONE_ITEM`); a frame ("how do I", "is
there a way to", "I'd like to") is dropped so what follows it is the request.
"""

from __future__ import annotations

__all__ = ["STOPWORDS", "ONE_ITEM", "frame"]

# Words that carry no intent in a request ("show me the ...", "what is ...").
STOPWORDS = frozenset("""
a an the me my mine i we our us you your it its this that these those is are was were be been being
am do does did to of for in on at by with from into onto about as and or but so than then there
here what which who whom whose how many much any some all every each please can could would should
will shall may might must just still yet now right currently lately recently really very also
has have had having let lets one ones up out them they their thing things get give show want need
retrieve obtain grab inspect describe display return fetch whole entire straight directly including
""".split()) | frozenset(("details detail metadata properties info information particulars specifics").split())

# Words asking about one item ("details of ticket 42", "info on the runner"): a soft hint for a
# singular get in a read; as words they rank nothing (every tool has details).
ONE_ITEM = frozenset("details detail metadata properties info information particulars specifics".split())

# Frames around a request that say nothing about it: "how do I ...", "is there a way to ...",
# "I'd like to ...". What follows them is the request (its verb decides the intent).
_FRAMES = tuple(tuple(f.split()) for f in (
    "how do i", "how do we", "how do you", "how can i", "how can we", "how would i", "how should i",
    "how to", "is it possible to", "is there a way to", "is there any way to", "can i", "can we",
    "could i", "could we", "i d like to", "i would like to", "i m trying to", "i am trying to",
    "we re trying to", "trying to", "i want to", "we want to", "i need to", "we need to",
    "what is the call to", "which api", "what endpoint", "which endpoint"))


def frame(words: list[str]) -> int:
    """How many leading *words* are a frame asking nothing (0 if none; the longest wins)."""
    return max((len(f) for f in _FRAMES if tuple(words[:len(f)]) == f and len(words) > len(f)), default=0)
