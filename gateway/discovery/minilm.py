"""all-MiniLM-L6-v2 with numpy alone: the sentence embeddings sentence-transformers makes, no torch.

The model (a 6-layer BERT of 384 dimensions, 12 heads, mean pooling, L2 normalisation; weights in
``model.safetensors``, its tokenizer in ``vocab.txt``) is read from a directory laid out as the
Hugging Face repository is (:func:`gateway.discovery.local_model.model_dir` finds it):

* ``config.json`` gives the sizes, ``layer_norm_eps`` and ``hidden_act`` (only ``gelu``, the exact
  one, is known); ``sentence_bert_config.json`` the sequence length (256 ids, ``[CLS]`` and
  ``[SEP]`` included: longer texts are truncated); ``1_Pooling/config.json`` must say mean pooling;
* :meth:`MiniLM.encode` tokenizes (:mod:`.wordpiece`), sorts the texts by length and runs them in
  forward passes of similar lengths (at most ``batch`` texts and ``_TOKENS`` padded ids each,
  padding under about a fifth) with an attention mask, in float32 throughout (the GELU in float64,
  see :func:`gelu`); pools the real tokens' states (mean) and normalises. Rows come back in the
  order of the texts. The matrix products run on the calling thread alone. Not thread-safe for one
  instance (:class:`~gateway.discovery.local_model.LocalEncoder` uses it from one thread).
* Memory: the file is mapped (:mod:`.safetensors`): the word embeddings (47 MB) stay there and are
  read by row; the 6 layers' matrices are copied once, inputs first (42 MB), which makes a query a
  third faster, into one buffer on 2 MiB huge pages in the order a pass reads them (:class:`_Arena`:
  a query streams all of them from memory; 7-8% faster again), each matrix by panels of 32 outputs
  (:func:`_product`: a query's products need no packing of the weights, 2× faster). Activations of
  one pass: ~40 MB at most.

Checked against sentence-transformers (torch, float32) on ``tests/data/discovery/minilm-reference.json``:
the same ids, cosine >= 0.9999 per text (in practice 0.99999+).
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gateway.discovery.safetensors import load as load_safetensors
from gateway.discovery.wordpiece import WordPiece

__all__ = ["MiniLM", "ModelError", "gelu"]

F32 = np.ndarray[Any, np.dtype[np.float32]]
_TOKENS = 2048  # padded ids in one forward pass: bounds the activations (~40 MB, the attention's scores the most)
_CHUNK = 1 << 16  # elements of one GELU step (stays in cache)
_PANEL = 32  # outputs per panel of a layer's matrix (see _product)
_SMALL_ROWS = 64  # rows up to which a product goes panel by panel (measured faster up to ~64-100)
_SQRT1_2 = 1.0 / math.sqrt(2.0)
# erfc(z) = t·exp(-z² + P(t)), t = 1/(1 + 0.4·z), for z >= 0: the form of Numerical Recipes' erfcc
# with a polynomial of degree 7 fitted here (least squares against math.erfc on 600,001 points of
# [0, 6], weighted by erfc). Evaluated in float64: |erf error| < 4e-9 on [0, 30] (3,000,001 points).
_ERFC_P = 0.4
_ERFC = (-1.4811283503454395, 0.9021032373575916, 0.95418555734523, -1.418441103252812, 2.815467718060333,
         -2.881010000543498, 1.3527853746424845, -0.24396243723863734)
_ERFC_STEP = _ERFC_P * _SQRT1_2  # t's step per |x| (z = |x|/√2 folded in)
_ERFC_C0 = _ERFC[0] + math.log(0.5)  # the constant term with the ½ of Φ(-|x|) = erfc/2 folded in


def _openblas() -> list[ctypes.CDLL]:
    """The OpenBLAS libraries this process has loaded (numpy's BLAS), read from its memory map."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            libs = sorted({line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1]})
        return [ctypes.CDLL(lib) for lib in libs]
    except OSError:
        return []


@functools.cache
def _blas_threads_setter() -> Callable[[int], int] | None:
    """OpenBLAS's ``openblas_set_num_threads_local`` (numpy's BLAS; 0.3.27+): the number of threads
    the *calling* thread's BLAS calls use, returning the previous one. None where there is none."""
    for lib in _openblas():
        setter = getattr(lib, "openblas_set_num_threads_local", None)
        if setter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
            return setter  # type: ignore[no-any-return]
    return None


@functools.cache
def _narrow_kernels() -> bool:
    """Whether numpy's OpenBLAS runs narrow products without packing: its AVX-512 cores
    (SkylakeX, Cooperlake, Sapphire Rapids: Intel since Skylake-SP, AMD since Zen 4) have small-matrix
    sgemm kernels, which multiply ``(rows, in) @ (in, 32)`` straight from the operands. Elsewhere
    (Haswell and Zen kernels: AVX2) a product by panels measured 0-13% slower than the whole one,
    so the layers keep the whole matrices there (see :func:`_product`)."""
    for lib in _openblas():
        for symbol in ("openblas_get_corename", "scipy_openblas_get_corename64_", "openblas_get_corename64_"):
            get = getattr(lib, symbol, None)
            if get is not None:
                get.restype = ctypes.c_char_p
                core = (get() or b"").decode("ascii", "replace").lower()
                return core in ("skylakex", "cooperlake", "sapphirerapids")
    return False


class ModelError(Exception):
    """The model directory cannot be used (a file missing, a layout or config this code does not run)."""


def gelu(x: F32) -> F32:
    """The exact GELU, ``x·Φ(x) = x/2·(1 + erf(x/√2))``, of a float32 array, in place (returned).

    Computed in float64 by chunks of ``_CHUNK`` elements with the erfc form above: with
    ``e = Φ(-|x|) = erfc(|x|/√2)/2``, ``x·Φ(x) = max(x, 0) - |x|·e`` for either sign (no
    cancellation below 0, no branch), so the result is the exact GELU rounded to float32.
    The constants are folded (``0.4/√2`` into the step, ``ln ½`` into the exponent) so one
    chunk takes 27 array operations.
    """
    flat = x.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        part = flat[start:start + _CHUNK]
        v = part.astype(np.float64)
        a = np.abs(v)
        t = a * _ERFC_STEP
        t += 1.0
        np.reciprocal(t, out=t)  # t = 1/(1 + 0.4·|x|/√2)
        acc = t * _ERFC[-1]
        acc += _ERFC[-2]
        for c in _ERFC[-3:0:-1]:
            acc *= t
            acc += c
        acc *= t
        acc += _ERFC_C0  # P(t) + ln ½
        sq = np.multiply(v, v)
        sq *= 0.5
        acc -= sq  # P(t) - x²/2 + ln ½
        np.exp(acc, out=acc)
        acc *= t  # erfc(|x|/√2)/2 = Φ(-|x|)
        acc *= a
        np.maximum(v, 0.0, out=v)
        v -= acc
        part[...] = v
    return x


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    """LayerNorm over the last axis of the 2-D *x*, in place (returned): *x* is a temporary of the
    caller's. The same operations as ``x.mean`` & co. (a sum divided by the count), without the
    Python layers of ``np.mean``, which cost as much as the arithmetic for the few rows of a query."""
    mean = np.add.reduce(x, axis=-1, keepdims=True)
    mean /= np.float32(x.shape[-1])
    np.subtract(x, mean, out=x)
    var = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[-1])
    x *= 1.0 / np.sqrt(var + np.float32(eps))
    x *= weight
    x += bias
    return x


def _product(x: F32, panels: F32) -> F32:
    """``x @ W`` for the 2-D *x* and ``W`` (in, out) stored by panels (``(out/p, in, p)``, C order).

    A query's few rows (at most ``_SMALL_ROWS``) are multiplied panel by panel in one numpy call
    (a stack of ``(rows, in) @ (in, p)`` products): OpenBLAS's AVX-512 kernels run a product this
    narrow without packing the weights first, and a query's encode takes 2-2.5× less time in its
    matrix products (42 MB of weights streamed once; the packing of ``x @ W`` read and wrote them
    again). A single panel (no such kernels: :func:`_narrow_kernels`) is ``x @ W`` as is. Longer
    passes (the index build's batches) are faster as one product over the whole matrix: it is put
    back together for them (a copy of one matrix, ~2% of such a pass). The two paths round
    differently in the last bits (sums in another order): a vector moves by ~1e-7, far inside the
    cosine 0.99999 between a text encoded alone and in a batch that tests/discovery/test_encoder.py
    already allows."""
    count, inner, width = panels.shape
    rows = x.shape[0]
    if count == 1:  # stored whole (a BLAS without narrow kernels, _narrow_kernels)
        product: F32 = x @ panels[0]
        return product
    if rows <= _SMALL_ROWS:
        out: F32 = np.matmul(x, panels).transpose(1, 0, 2).reshape(rows, count * width)
        return out
    whole: F32 = x @ panels.transpose(1, 0, 2).reshape(inner, count * width)
    return whole


class _Arena:
    """One float32 buffer for every layer's matrices, in the order a forward pass reads them, its
    start on a 2 MiB boundary: numpy asks the kernel for transparent huge pages on a buffer this
    large (``madvise``), and aligned, 2 MiB pages back the whole of it. A query streams all 42 MB
    of the matrices from memory (more than the L3 cache holds): on 4 KiB pages the hardware
    prefetcher stops at every page and each page costs a TLB walk; measured, a query encodes
    ~8% faster (``bench/discovery.py --semantic``; the same numbers, only their addresses move)."""

    _ALIGN = (2 << 20) // 4  # floats in 2 MiB

    def __init__(self, floats: int) -> None:
        raw = np.empty(floats + self._ALIGN, dtype=np.float32)
        skip = -(raw.ctypes.data // 4) % self._ALIGN  # numpy's buffers are aligned to 16 bytes at least
        self._buffer = raw[skip:skip + floats]
        self._used = 0

    def take(self, matrix: F32) -> F32:
        """A C-order copy of *matrix* (any strides) in the arena's next free place."""
        view = self._buffer[self._used:self._used + matrix.size].reshape(matrix.shape)
        view[...] = matrix
        self._used += matrix.size
        return view


class _Layer:
    def __init__(self, w: dict[str, np.ndarray[Any, Any]], prefix: str, arena: _Arena) -> None:
        def get(name: str) -> F32:
            return w[f"{prefix}.{name}"].astype(np.float32, copy=False)

        def inputs_first(weight: F32) -> F32:
            # (in, out), contiguous: x @ W takes a third less time for the few rows of a query than
            # with the (out, in) file layout seen transposed (the same for long batches); stored by
            # panels of _PANEL outputs, (out/_PANEL, in, _PANEL), where the BLAS has narrow kernels,
            # else as one panel (1, in, out): see _product.
            out = weight.shape[0]
            width = _PANEL if _narrow_kernels() and out % _PANEL == 0 else out
            return arena.take(weight.T.reshape(weight.shape[1], out // width, width).transpose(1, 0, 2))

        # Q, K and V in one product: (hidden, 3·hidden).
        self.qkv = inputs_first(np.concatenate([get(f"attention.self.{n}.weight") for n in ("query", "key", "value")]))
        self.qkv_b = np.concatenate([get(f"attention.self.{n}.bias") for n in ("query", "key", "value")])
        self.out, self.out_b = inputs_first(get("attention.output.dense.weight")), get("attention.output.dense.bias")
        self.ln1 = get("attention.output.LayerNorm.weight"), get("attention.output.LayerNorm.bias")
        self.inter, self.inter_b = inputs_first(get("intermediate.dense.weight")), get("intermediate.dense.bias")
        self.down, self.down_b = inputs_first(get("output.dense.weight")), get("output.dense.bias")
        self.ln2 = get("output.LayerNorm.weight"), get("output.LayerNorm.bias")

    @staticmethod
    def floats(hidden: int, inner: int) -> int:
        """The arena floats one layer's four matrices take."""
        return hidden * 3 * hidden + hidden * hidden + 2 * hidden * inner


class MiniLM:
    """One loaded model (weights mapped read-only; see the module doc)."""

    def __init__(self, directory: str | Path) -> None:
        root = Path(directory)
        try:
            config = json.loads((root / "config.json").read_text(encoding="utf-8"))
            sbert = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
            pooling = json.loads((root / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"{root}: cannot read the model's configuration: {exc}") from None
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ModelError(f"{root}/config.json: a BERT model with the exact gelu is expected")
        if not pooling.get("pooling_mode_mean_tokens") or any(
                pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                         "pooling_mode_mean_sqrt_len_tokens")):
            raise ModelError(f"{root}/1_Pooling/config.json: only mean pooling is implemented")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.max_length = min(int(sbert.get("max_seq_length", 512)), int(config["max_position_embeddings"]))
        self.tokenizer = WordPiece.load(root / "vocab.txt", self.max_length)
        try:
            w = load_safetensors(root / "model.safetensors")
            self.words = w["embeddings.word_embeddings.weight"]
            self.positions = w["embeddings.position_embeddings.weight"]
            self.type0 = w["embeddings.token_type_embeddings.weight"][0]
            self.ln0 = w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]
            count = int(config["num_hidden_layers"])
            arena = _Arena(count * _Layer.floats(self.hidden, int(config["intermediate_size"])))
            self.layers = [_Layer(w, f"encoder.layer.{i}", arena) for i in range(count)]
            w.drop_pages()  # the layers were copied: only the embeddings are read from the mapping now
        except (OSError, KeyError, ValueError) as exc:
            raise ModelError(f"{root}/model.safetensors: cannot read the weights: {exc!r}") from None
        if self.words.shape != (len(self.tokenizer.vocab), self.hidden) or self.hidden % self.heads:
            raise ModelError(f"{root}: the vocabulary and the weights do not match")
        self.dimension = self.hidden

    def encode(self, texts: list[str], batch: int = 32) -> F32:
        """The normalised embeddings of *texts*, one float32 row each, in order.

        The matrix products run on the calling thread alone (OpenBLAS's thread-local setting, put
        back after): spread over threads, on a busy machine they spin and cost 3-4× the CPU for the
        same result, and the encoder is meant to take one core and leave the rest to serving."""
        setter = _blas_threads_setter()
        before = setter(1) if setter is not None else None
        try:
            return self._encode(texts, batch)
        finally:
            if setter is not None and before is not None:
                setter(before)

    def _encode(self, texts: list[str], batch: int) -> F32:
        ids = self.tokenizer.encode_all(texts)
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            # Longest last: a batch's padded size is its last text's length times its count.
            # Similar lengths only: a text joins while the batch's padding stays under a fifth of it.
            end, real = start + 1, len(ids[order[start]])
            while end < len(order) and end - start < batch:
                longest = len(ids[order[end]])
                count = end - start + 1
                if count * longest > _TOKENS or count * longest > 1.25 * (real + longest) + 8 * count:
                    break
                real += longest
                end += 1
            rows = order[start:end]
            out[rows] = self._batch([ids[i] for i in rows])
            start = end
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, np.float32(1e-12))
        return out

    def _batch(self, seqs: list[list[int]]) -> F32:
        n, length = len(seqs), max(len(s) for s in seqs)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = s
            mask[i, :len(s)] = 1.0
        h, heads = self.hidden, self.heads
        x = self.words[ids] + self.positions[:length] + self.type0  # (n, length, h)
        x = _layer_norm(x.reshape(n * length, h), *self.ln0, self.eps)
        # Padded keys get no attention: their scores are pushed to -1e9 before the softmax. Without
        # padding (one text, or texts of one length) the bias is all zeros: adding it changes nothing.
        padded = any(len(s) < length for s in seqs)
        bias = ((mask - 1.0) * np.float32(1e9))[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(h // heads))
        for layer in self.layers:
            qkv = _product(x, layer.qkv)
            qkv += layer.qkv_b
            qkv = qkv.reshape(n, length, 3, heads, h // heads).transpose(2, 0, 3, 1, 4)  # (3, n, heads, L, d)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= scale
            if padded:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * length, h)
            attended = _product(context, layer.out)
            attended += layer.out_b
            attended += x
            x = _layer_norm(attended, *layer.ln1, self.eps)
            inner = _product(x, layer.inter)
            inner += layer.inter_b
            gelu(inner)
            down = _product(inner, layer.down)
            down += layer.down_b
            down += x
            x = _layer_norm(down, *layer.ln2, self.eps)
        states = x.reshape(n, length, h)
        summed = np.einsum("nlh,nl->nh", states, mask)
        pooled: F32 = summed / np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        return pooled
