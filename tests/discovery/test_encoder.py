"""The numpy MiniLM encoder (gateway/discovery/minilm.py and its tokenizer, reader and loader) against
sentence-transformers itself: ``tests/data/discovery/minilm-reference.json`` (made by
bench/minilm_reference.py with torch) holds ~30 varied texts, the ids sentence-transformers fed the
model and the vectors it returned. The model is the one ``make test`` installs
(requirements-model.txt); these tests fail, not skip, without it."""

from __future__ import annotations

import base64
import json
import logging
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from gateway.discovery import local_model
from gateway.discovery.embeddings import EmbeddingsError
from gateway.discovery.local_model import LocalEncoder, ModelIntegrityError, ModelMissing, verify
from gateway.discovery.minilm import _SMALL_ROWS, MiniLM, _product, gelu
from gateway.discovery.safetensors import SafetensorsError
from gateway.discovery.safetensors import load as load_safetensors
from gateway.discovery.wordpiece import WordPiece

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "discovery" / "minilm-reference.json"
DOC = json.loads(REFERENCE.read_text(encoding="utf-8"))
ROWS = DOC["rows"]


def _vector(row: dict[str, str]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(row["embedding_f32_b64"]), dtype="<f4")


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM(local_model.model_dir())


def test_the_reference_covers_what_it_claims() -> None:
    assert DOC["max_seq_length"] == 256 and DOC["dimension"] == 384 and len(ROWS) >= 30
    lengths = [len(r["ids"]) for r in ROWS]
    assert sum(n == 256 for n in lengths) >= 4  # long tool texts, truncated
    assert any(r["text"] == "" for r in ROWS) and any(not r["text"].strip() and r["text"] for r in ROWS)


def test_the_installed_model_is_the_pinned_one() -> None:
    directory = local_model.model_dir()
    assert directory == local_model.installed_model_dir() and directory.name == "model"
    verify(directory)


def test_token_ids_equal_sentence_transformers(model: MiniLM) -> None:
    for row in ROWS:
        assert model.tokenizer.encode(row["text"]) == row["ids"], row["text"][:80]


def test_each_vector_is_sentence_transformers_within_cosine_0_9999(model: MiniLM) -> None:
    texts = [r["text"] for r in ROWS]
    reference = np.stack([_vector(r) for r in ROWS])
    batched = model.encode(texts)
    assert batched.dtype == np.float32 and batched.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    cosines = (batched * reference).sum(axis=1)
    assert cosines.min() >= 0.9999, {texts[i][:40]: float(cosines[i]) for i in np.argsort(cosines)[:3]}
    # Alone or in a batch (padding, another order): the same vector.
    alone = np.stack([model.encode([t])[0] for t in texts[::7]])
    assert ((alone * batched[::7]).sum(axis=1)).min() >= 0.99999


def test_a_product_by_panels_is_the_product_of_the_whole_matrix(model: MiniLM) -> None:
    # A layer's matrices are stored by panels of outputs; a query's few rows are multiplied panel by
    # panel, longer passes over the whole matrix put back together: both are x @ W to float32 rounding.
    layer = model.layers[0]
    rng = np.random.default_rng(7)
    for panels in (layer.qkv, layer.out, layer.inter, layer.down):
        count, inner, width = panels.shape
        whole = panels.transpose(1, 0, 2).reshape(inner, count * width).astype(np.float64)
        for rows in (1, 9, _SMALL_ROWS, _SMALL_ROWS + 1, 300):
            x = rng.standard_normal((rows, inner)).astype(np.float32)
            got = _product(x, panels)
            assert got.shape == (rows, count * width) and got.dtype == np.float32 and got.flags.c_contiguous
            exact = x.astype(np.float64) @ whole
            assert np.abs(got - exact).max() <= 1e-5 * np.abs(exact).max(), (rows, panels.shape)


def test_the_tokenizer_splits_as_bert_does() -> None:
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able",
                                         "cafe", ",", "!", "東", "京", "x", "##y", "σ"])}
    wp = WordPiece(vocab, max_length=8)
    assert wp.encode("Unaffable, CAFÉ!") == [2, 5, 6, 7, 9, 8, 10, 3]
    assert wp.encode("東京") == [2, 11, 12, 3]  # each ideograph a word
    assert wp.encode("xyz") == [2, 1, 3]  # a word that cannot be covered is one [UNK]
    assert wp.encode("[MASK] x[SEP]") == [2, 4, 13, 3, 3]  # special tokens as written, case and all
    assert wp.encode("[mask]") == [2, 1, 1, 1, 3]  # not in another case: "[", "mask", "]"
    assert wp.encode("x\u0000\u200by\ufffd") == [2, 13, 14, 3]  # NUL, format characters, U+FFFD dropped
    assert wp.encode("ΣΣ") == [2, 1, 3] and wp.encode("Σ") == [2, 15, 3]  # σ, never a final ς
    assert wp.encode("un " * 20) == [2] + [5] * 6 + [3]  # truncated to max_length ids in all
    assert wp.encode("x" * 101) == [2, 1, 3]  # over 100 characters: [UNK]
    assert wp.encode("") == [2, 3]


def test_gelu_is_the_exact_one_to_float32_rounding() -> None:
    xs = np.linspace(-10, 10, 400_001, dtype=np.float32)
    exact = np.array([0.5 * float(x) * math.erfc(-float(x) / math.sqrt(2)) for x in xs[::50]])
    got = gelu(xs.copy())[::50].astype(np.float64)
    assert np.abs(got - exact).max() <= 1e-7 * np.maximum(1.0, np.abs(exact)).max()
    assert gelu(np.array([0.0, 40.0, -40.0], dtype=np.float32)).tolist() == [0.0, 40.0, -0.0]


def _safetensors(path: Path, header: dict[str, object], data: bytes) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def test_the_safetensors_reader_maps_tensors_and_refuses_a_bad_header(tmp_path: Path) -> None:
    a = np.arange(6, dtype="<f4").reshape(2, 3)
    b = np.array([7, -1], dtype="<i8")
    good = _safetensors(tmp_path / "ok.safetensors",
                        {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                         "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}}, a.tobytes() + b.tobytes())
    tensors = load_safetensors(good)
    assert np.array_equal(tensors["a"], a) and np.array_equal(tensors["b"], b)
    assert not tensors["a"].flags.writeable  # a view of the read-only mapping
    bad = {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 28]}}  # 28 bytes cannot be 2×3 floats
    with pytest.raises(SafetensorsError, match="do not hold"):
        load_safetensors(_safetensors(tmp_path / "bad.safetensors", bad, bytes(28)))
    (tmp_path / "junk").write_bytes(struct.pack("<Q", 4) + b"{no}")
    with pytest.raises(SafetensorsError, match="not JSON"):
        load_safetensors(tmp_path / "junk")
    (tmp_path / "short").write_bytes(b"\x01")
    with pytest.raises(SafetensorsError):
        load_safetensors(tmp_path / "short")


def _copy_model(tmp: Path) -> Path:
    source = local_model.model_dir()
    target = tmp / "model"
    shutil.copytree(source, target)
    return target


def test_an_altered_model_file_is_refused_naming_the_file_and_both_hashes(tmp_path: Path) -> None:
    directory = _copy_model(tmp_path)
    weights = directory / "model.safetensors"
    with weights.open("r+b") as f:  # one byte of one weight
        f.seek(-5, 2)
        byte = f.read(1)
        f.seek(-5, 2)
        f.write(bytes([byte[0] ^ 0x40]))
    with pytest.raises(ModelIntegrityError) as err:
        verify(directory)
    message = str(err.value)
    assert str(weights) in message and local_model.PINNED["model.safetensors"] in message
    assert len([w for w in message.split() if len(w.strip(",")) == 64]) == 2  # both hashes
    encoder = LocalEncoder(directory)
    try:
        with pytest.raises(EmbeddingsError) as failed:
            encoder.load()
        assert failed.value.reason == "model" and "refusing to load it" in str(failed.value)
    finally:
        encoder.shutdown()


def test_a_missing_model_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelMissing, match="search.local.path"):
        local_model.model_dir(tmp_path)
    monkeypatch.setattr(local_model, "installed_model_dir", lambda: None)
    with pytest.raises(ModelMissing) as err:
        local_model.model_dir()
    assert "requirements-model.txt" in str(err.value) and "--no-deps" in str(err.value)


def test_the_model_is_found_without_importing_its_package() -> None:
    import sys

    sys.modules.pop(local_model.PACKAGE, None)
    assert local_model.installed_model_dir() is not None
    assert local_model.PACKAGE not in sys.modules


async def test_the_local_encoder_keeps_the_embeddings_contract(tmp_path: Path) -> None:
    encoder = LocalEncoder(cache_dir=tmp_path / "vectors")
    try:
        texts = [ROWS[0]["text"], ROWS[2]["text"], ROWS[0]["text"]]
        rows = await encoder.embed(texts, "index")
        assert rows.dtype == np.float32 and rows.shape == (3, 384)
        assert np.array_equal(rows[0], rows[2]) and float(rows[0] @ _vector(ROWS[0])) >= 0.9999
        query = await encoder.embed([ROWS[2]["text"]], "query", 384)
        assert float(query[0] @ rows[1]) >= 0.99999
        with pytest.raises(EmbeddingsError) as err:
            await encoder.embed(["x"], "query", 1536)
        assert err.value.reason == "dimensions"
        assert encoder.cached == 0 and list((tmp_path / "vectors").glob("minilm-*.sqlite3"))
    finally:
        encoder.shutdown()
    # Another process (here: another encoder) with the same folder embeds nothing it has seen.
    again = LocalEncoder(cache_dir=tmp_path / "vectors")
    try:
        rows2 = await again.embed([ROWS[2]["text"], ROWS[5]["text"]], "index")
        assert again.cached == 1 and float(rows2[0] @ rows[1]) >= 0.99999
    finally:
        again.shutdown()


async def test_a_cache_folder_that_cannot_be_used_leaves_the_model_running(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    encoder = LocalEncoder(cache_dir=tmp_path / "a-file" / "vectors")
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.discovery.local_model"):
            rows = await encoder.embed([ROWS[0]["text"]], "index")
        assert float(rows[0] @ _vector(ROWS[0])) >= 0.9999 and encoder.cached == 0
        warned = [r.getMessage() for r in caplog.records if "cannot be used" in r.getMessage()]
        assert len(warned) == 1 and "a-file" in warned[0] and "memory only" in warned[0]
    finally:
        encoder.shutdown()


def test_one_encoder_per_model_and_cache_folder_in_a_process() -> None:
    assert local_model.shared() is local_model.shared()
    assert local_model.shared(None, "/nonexistent/x") is not local_model.shared()
