"""The retrieval world of the paper's Figure 1: a real Qdrant index, lab-made embedders, canary probes.

- **Embedders** (``model:embed@v``): deterministic and made here, nothing
  downloaded.  A text's vector is the normalised sum of its tokens'
  vectors; a token's vector is drawn from a generator seeded by (the
  model's space seed, a BLAKE2 hash of the token).  Model 2 has the same
  dimension and a different space seed: a different embedding space
  behind an unchanged dimension, so nothing fails loudly -- the query
  just lands near the wrong documents.
- **Index versions** (``index:docs@v``): one Qdrant collection each, in
  local mode (``QdrantClient(":memory:")`` or a folder under the run's
  scratch), built by embedding the corpus with the model the version was
  built with (``BUILT_WITH``), cosine distance.  Each index version also
  stores **canary** vectors: fixed canary texts embedded with its build
  model, kept as points of a side collection.
- **Canary probe** (contract inference): for a pair (index@v, model@u) it
  embeds the canary texts with model u and compares them with the canary
  vectors stored for index@v (retrieved from Qdrant); a mean cosine below
  ``CANARY_THRESHOLD`` means the model cannot query that index.

The corpus: ``documents`` short texts, each with four topic tokens of its
own and filler tokens shared by all; a query for document k is three of its
topic tokens.  The **controlled document** of an execution is
the one its query is about; the oracle is that document's id, fixed before
anything is resolved.
"""
from __future__ import annotations

import hashlib
import random
from functools import lru_cache

import numpy as np

DIM = 64
SPACE_SEEDS = {1: 1_000_003, 2: 2_000_029}  # model:embed version -> embedding space
BUILT_WITH = {1: 1, 2: 2}  # index:docs version -> the model version its vectors came from
CANARIES = ("canary alpha ledger", "canary bravo harbour", "canary charlie meadow", "canary delta quartz")
CANARY_THRESHOLD = 0.9
FILLER = ("report", "status", "weekly", "summary", "team", "update", "notes", "draft")


def token_hash(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")


@lru_cache(maxsize=65536)
def token_vector(space: int, token: str) -> np.ndarray:
    rng = np.random.default_rng([space, token_hash(token)])
    return rng.standard_normal(DIM)


def embed(model_version: int, text: str) -> list[float]:
    """The lab's embedder ``model:embed@model_version`` applied to ``text`` (unit vector)."""
    space = SPACE_SEEDS[model_version]
    v = np.sum([token_vector(space, t) for t in text.lower().split()], axis=0)
    return (v / np.linalg.norm(v)).tolist()


def corpus(documents: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join([f"topic{k}w{j}" for j in range(4)] + rng.sample(FILLER, 3)) for k in range(documents)]


def query_for(k: int, rng: random.Random) -> str:
    return " ".join(rng.sample([f"topic{k}w{j}" for j in range(4)], 3))


class RetrievalWorld:
    """The documents indexed in Qdrant, one collection per index version, plus canaries."""

    def __init__(self, documents: int, seed: int, path: str | None = None, index_versions=(1, 2)):
        from qdrant_client import QdrantClient, models

        self.models = models
        self.client = QdrantClient(path=path) if path else QdrantClient(":memory:")
        self.texts = corpus(documents, seed)
        for v in index_versions:
            self.build(v)

    def collection(self, index_version: int) -> str:
        return f"docs_v{index_version}"

    def build(self, index_version: int) -> None:
        m, model = self.models, BUILT_WITH[index_version]
        for name, texts in ((self.collection(index_version), self.texts), (f"canary_v{index_version}", CANARIES)):
            self.client.create_collection(name, vectors_config=m.VectorParams(size=DIM, distance=m.Distance.COSINE))
            self.client.upsert(name, points=[m.PointStruct(id=i, vector=embed(model, t), payload={"doc": i})
                                             for i, t in enumerate(texts)])

    def search(self, index_version: int, model_version: int, text: str) -> int:
        """Top-1 document id for ``text`` embedded by ``model:embed@model_version`` in ``index:docs@index_version``."""
        hits = self.client.query_points(self.collection(index_version), query=embed(model_version, text), limit=1).points
        return int(hits[0].id)

    def fetch(self, index_version: int, doc: int) -> str:
        """Read a document by id from an index version (uses the index, not the model)."""
        return self.client.retrieve(self.collection(index_version), ids=[doc])[0].payload and self.texts[doc]

    def canary_agrees(self, index_version: int, model_version: int) -> bool:
        stored = self.client.retrieve(f"canary_v{index_version}", ids=list(range(len(CANARIES))), with_vectors=True)
        stored = {p.id: np.asarray(p.vector) for p in stored}
        sims = [float(np.dot(stored[i], embed(model_version, t))) for i, t in enumerate(CANARIES)]
        return float(np.mean(sims)) >= CANARY_THRESHOLD

    def probe(self, a: str, v: int, b: str, u: int) -> bool | None:
        """Registry probe for contract inference: True/False for (index:docs, model:embed) pairs, else None."""
        if a == "index:docs" and b == "model:embed":
            return self.canary_agrees(v, u)
        if a == "model:embed" and b == "index:docs":
            return self.canary_agrees(u, v)
        return None

    def close(self) -> None:
        self.client.close()
