"""The labelled task sets of issue 28 (six public APIs besides GitHub, each by an independent
author): every label names an operation of its spec, 30 person and 30 agent (``model``) queries,
no query twice, and each set declares whether it may be tuned on.

These are data checks only: they read the sets and the specs, never the ranker, so a set can be
kept measurement-only and still be known to be well formed.
"""

from __future__ import annotations

import collections
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

DATA = Path(__file__).resolve().parents[1] / "data"
CATALOGS = ("stripe", "twilio-api", "opsgenie", "vikunja", "digitalocean", "box", "slack", "sendgrid")
MEASUREMENT_ONLY = {"box", "digitalocean", "slack", "sendgrid"}
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def spec_keys(spec: dict[str, Any], key: str) -> collections.Counter[str]:
    """The labels a set keyed by ``key`` may use: operationIds, or ``METHOD /path``."""
    found: collections.Counter[str] = collections.Counter()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                label = op.get("operationId") if key == "operationId" else f"{method.upper()} {path}"
                if label:
                    found[label] += 1
    return found


@pytest.mark.parametrize("catalog", CATALOGS)
def test_a_task_set_labels_only_operations_of_its_spec(catalog: str) -> None:
    tasks_file = DATA / "discovery" / f"{catalog}-tasks.yaml"
    text = tasks_file.read_text()
    data = yaml.safe_load(text)
    with gzip.open(DATA / "openapi" / f"{catalog}.json.gz") as f:
        known = spec_keys(json.load(f), data["key"])
    tasks = data["tasks"]
    by = collections.Counter(task["by"] for task in tasks)
    assert by == {"person": 30, "model": 30}
    queries = [re.sub(r"\s+", " ", task["query"].strip().lower()) for task in tasks]
    assert len(set(queries)) == len(queries)
    unknown = [(task["query"], op) for task in tasks for op in task["ops"] if op not in known]
    assert not unknown
    role = "MEASUREMENT-ONLY" if catalog in MEASUREMENT_ONLY else "tuning set"
    assert f"# Role: {role}" in text
