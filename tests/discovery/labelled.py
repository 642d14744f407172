"""The labelled search sets and the GitHub corpus they are written against (tests and bench only:
not shipped in the wheel, like the task sets it reads).

``tests/data/discovery/github-tasks.yaml`` holds plain-words tasks, each with the operationIds that
do it; :func:`evaluate` reports recall@1 and recall@5 of a :class:`SearchIndex` over them. The
ranker was tuned on that set; ``HELDOUT`` was written after that tuning, ``FRESH`` after a look at
the held-out misses, each to measure new wording honestly. ``BLIND`` (101 tasks) was written
before the ranker's second round of work; it and ``FRESH`` were measured only in that round and
tuned on in the third (docs/discovery.md). ``BLIND2`` (118 tasks) was written by an independent
author who saw neither the ranker nor its vocabulary; it was measurement only in round 3 and is
tuned on since round 4. ``BLIND3``, by another independent author, was measurement only in round 4
and is tuned on since round 5; ``BLIND4``, by a fourth independent author, was measurement only in
round 5 and is tuned on since round 6; ``BLIND5``, by a fifth, is measurement only (round 6). Its
tasks carry ``by: person`` or ``by: model`` (who would type the query: a person in a chat, or an
agent searching for a tool on someone's behalf).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gateway.discovery.index import SearchIndex, ToolDoc
from gateway.discovery.openapi import operation_docs

__all__ = ["GITHUB_SPEC", "TASKS", "HELDOUT", "FRESH", "BLIND", "BLIND2", "BLIND3", "BLIND4", "BLIND5", "DEV", "GITHUB_SETS", "Corpus", "github_corpus", "load_tasks", "evaluate", "Recall"]

_DATA = Path(__file__).resolve().parents[1] / "data"
GITHUB_SPEC = _DATA / "openapi" / "github-api.json.gz"
TASKS = _DATA / "discovery" / "github-tasks.yaml"
HELDOUT = _DATA / "discovery" / "github-tasks-heldout.yaml"
FRESH = _DATA / "discovery" / "github-tasks-fresh.yaml"
BLIND = _DATA / "discovery" / "github-tasks-blind.yaml"
DEV = _DATA / "discovery" / "github-tasks-dev.yaml"
BLIND2 = _DATA / "discovery" / "github-tasks-blind2.yaml"
BLIND3 = _DATA / "discovery" / "github-tasks-blind3.yaml"
BLIND4 = _DATA / "discovery" / "github-tasks-blind4.yaml"
BLIND5 = _DATA / "discovery" / "github-tasks-blind5.yaml"
# (label, file, tuned on?) of every GitHub set; blind-5 is measurement only (never tuned on).
GITHUB_SETS: tuple[tuple[str, Path, bool], ...] = (
    ("main", TASKS, True), ("held-out", HELDOUT, True), ("dev", DEV, True), ("fresh", FRESH, True),
    ("blind", BLIND, True), ("blind-2", BLIND2, True), ("blind-3", BLIND3, True), ("blind-4", BLIND4, True),
    ("blind-5", BLIND5, False))


@dataclass(frozen=True, slots=True)
class Corpus:
    docs: tuple[ToolDoc, ...]
    tools: tuple[dict[str, Any], ...]  # the MCP Tool objects, as tools/list would serve them
    name_of: dict[str, str]  # operationId → tool name


@dataclass(frozen=True, slots=True)
class Recall:
    tasks: int
    at1: float
    at5: float
    misses: tuple[tuple[str, tuple[str, ...]], ...]  # (query, top 5 names) of tasks not found at 5


def github_corpus(prefix: str = "") -> Corpus:
    """GitHub's REST API mapped by the OpenAPI connector exactly as a connector would (1,223 tools)."""
    from connectors.openapi.config import OpenAPIConfig
    from connectors.openapi.loader import check_version
    from connectors.openapi.mapping import map_spec

    doc = json.loads(gzip.decompress(GITHUB_SPEC.read_bytes()))
    mapped = map_spec(doc, check_version(doc, str(GITHUB_SPEC)),
                      OpenAPIConfig(name="github", type="openapi", spec=str(GITHUB_SPEC)))
    docs = tuple(operation_docs(doc, mapped.operations, prefix))
    tools = tuple({**op.definition, "name": prefix + op.name} for op in mapped.operations)
    return Corpus(docs, tools, {op.operation_id: prefix + op.name for op in mapped.operations if op.operation_id})


def load_tasks(path: Path = TASKS) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = yaml.safe_load(path.read_text())["tasks"]
    return tasks


def evaluate(index: SearchIndex, corpus: Corpus, tasks: list[dict[str, Any]]) -> Recall:
    at1 = at5 = 0
    misses = []
    for task in tasks:
        want = {corpus.name_of[op] for op in task["ops"]}
        top = [h.name for h in index.search(task["query"], 5)]
        at1 += bool(top) and top[0] in want
        if want & set(top):
            at5 += 1
        else:
            misses.append((task["query"], tuple(top)))
    n = len(tasks)
    return Recall(n, at1 / n, at5 / n, tuple(misses))
