"""The core's sense tables: meanings of English the sense rules read whatever the API.

:class:`~gateway.discovery.lexicon.SenseTables` are mostly a domain pack's (who "starred" is
GitHub's stargazers); a few of the rules they feed are about how anyone asks, whatever the API:

* being told whenever something happens ("post to <url> whenever a task gets created", "email me
  when an invoice fails") asks for a webhook or an event subscription to be set up;
* a reaction used as a verb at the start ("thumbs-up comment 55") gives a reaction;
* telling someone something on a thread ("tell the reporter that it ships Monday") posts a
  comment, a reply or a message;
* handing a piece of work (a ticket, a task, an alert ...) over to someone assigns it.

A catalog without such tools is not hurt: the concepts find nothing there. A pack may give its
own meaning for each (the github pack's are the same words, so it reads these queries as before).
"""

from __future__ import annotations

from gateway.discovery.lexicon import SenseTables

__all__ = ["CORE_SENSES"]

# Handing a piece of work over to someone assigns it: "hand alert 3f2a over to jake", "pass the
# ticket to the on-call", "reassign the incident".
_WORK = ("ticket", "issue", "task", "incident", "alert", "case", "bug", "todo", "job")
_HANDING = ("hand", "pass", "reassign")

CORE_SENSES = SenseTables(
    object_senses={(verb, thing): (("assign", "assignee"),) for verb in _HANDING for thing in _WORK},
    subscription=(("webhook", "hook", "subscription", "event"), ("create", "set")),
    reaction=(("reaction",), ("create",)),
    message=(("comment", "reply", "message"), ("create",)),
)
