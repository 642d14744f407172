"""Before/after check: the top 5 of every labelled GitHub query, read with the github pack.

A change meant to leave the GitHub ranking alone (moving knowledge between the core and the pack,
issue 28) is checked by saving each query's top 5 before it and comparing after:
``--save FILE`` writes them, ``--compare FILE`` prints, per set, how many tasks have the same top 5
and recall@5 before/after. The measurement-only set (blind-5) is stored as one hash per task and
only counted: none of its queries, answers or misses is ever printed (docs/discovery.md).

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/discovery_top5.py --save /tmp/top5.json`` (then
``--compare``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.discovery import SearchIndex  # noqa: E402
from tests.discovery.labelled import GITHUB_SETS, github_corpus, load_tasks  # noqa: E402

PACKS = ("github",)


def snapshot() -> dict[str, list[dict[str, object]]]:
    """Per set label: per task, its top 5 (a hash of it for a measurement-only set) and a hit bit."""
    corpus = github_corpus("")
    index = SearchIndex(PACKS)
    index.sync(corpus.docs)
    out: dict[str, list[dict[str, object]]] = {}
    for label, path, tuned in GITHUB_SETS:
        rows = []
        for task in load_tasks(path):
            top = [h.name for h in index.search(task["query"], 5)]
            hit = bool({corpus.name_of[op] for op in task["ops"]} & set(top))
            key: object = top if tuned else hashlib.sha256("\0".join(top).encode()).hexdigest()
            rows.append({"top": key, "hit": hit})
        out[label] = rows
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path)
    group.add_argument("--compare", type=Path)
    args = parser.parse_args()
    now = snapshot()
    if args.save:
        args.save.write_text(json.dumps(now))
        print(f"saved {sum(map(len, now.values()))} tasks to {args.save}")
        return 0
    before = json.loads(args.compare.read_text())
    changed = 0
    for label, rows in now.items():
        old = before.get(label, [])
        same = sum(a["top"] == b["top"] for a, b in zip(old, rows, strict=False))
        changed += len(rows) - same
        r5 = (sum(r["hit"] for r in old) / max(len(old), 1), sum(r["hit"] for r in rows) / max(len(rows), 1))
        print(f"{label:10} tasks {len(rows):4}  same top 5 {same:4}  recall@5 {r5[0]:.3f} -> {r5[1]:.3f}")
    print(f"tasks whose top 5 changed: {changed}")
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
