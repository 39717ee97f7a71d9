"""The retrieval workflow of the paper's Figure 1 on a real Qdrant index (paper §1, §5.2).

Per execution (the controlled document and its query drawn from the
execution's seed): workflow T1 resolves ``model:embed`` and ``index:docs``
and retrieves (its first query); it pauses and is checkpointed; embedding
model 2 (same dimension, different space) is deployed; on resume T1
resolves both identities again, as its follow-up step does, and queries.
Under live aliases the new model queries the index built with the old one
and the controlled document does not come back; a profile that keeps the
model stable (S1), or that enforces the declared contract ``index:docs@1
requires model:embed@1`` (C1), or the lockfile (StaticPinning), returns it.

The index is Qdrant in local mode (``qdrant-client``, in-process; a folder
under the run's scratch, or ``:memory:``) with one collection per index
version; the embedders are the lab's own (``runners/isolation/retrieval_workflow.py``).
One cell per profile; the corpus is built once per cell.  Records:
whether the controlled document came back on resume, whether the workflow
was refused, the versions used, and the first query's result (a control:
before the deployment every profile must get it right).
"""
from __future__ import annotations

import random
from pathlib import Path

from mechanisms import resolve
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact, derive_seed
from runners.isolation.retrieval_workflow import RetrievalWorld, query_for
from runners.isolation.workflow_runtime import Runtime, combine, history_meta, to_history
from vocabulary.isolation import Contract, Contracts, Registry

DEFAULT_PROFILES = ("SRC", "RSR", "CR", "SSI", "StaticPinning")
REPETITIONS = {"quick": 10, "paper": 200}
DOCUMENTS = 128
DECLARED = (Contract.parse("index:docs@1 requires model:embed@1"), Contract.parse("index:docs@2 requires model:embed@2"))


def figure1_registry(contracts=DECLARED, probe=None) -> Registry:
    return Registry({"model:embed": [1], "index:docs": [1]}, {"model:embed": 1, "index:docs": 1},
                    Contracts(contracts), probe=probe)


def search(world: RetrievalWorld, index: int | None, model: int | None, text: str) -> int | None:
    return None if index is None or model is None else world.search(index, model, text)


def figure1(world: RetrievalWorld, mechanism, controlled: int, text: str, group, contracts=DECLARED) -> tuple[dict, object]:
    """One execution of the Figure 1 workflow; returns (record fields, history)."""
    reg = figure1_registry(contracts)
    rt = Runtime(reg, mechanism, group=group)
    rt.start("T1")
    m, i = rt.resolve("T1", "model:embed"), rt.resolve("T1", "index:docs")
    first = search(world, i, m, text)
    rt.note("T1", "query", index=i, model=m, returned=first)
    rt.pause("T1")
    rt.deploy("model:embed", 2)
    rt.resume("T1")
    m2, i2 = rt.resolve("T1", "model:embed"), rt.resolve("T1", "index:docs")
    second = search(world, i2, m2, text)
    rt.note("T1", "query", index=i2, model=m2, returned=second)
    rt.end("T1")
    refused = second is None
    return {"controlled_doc": controlled, "first_returned": -1 if first is None else first,
            "first_correct": first == controlled, "returned_doc": -1 if second is None else second,
            "controlled_document_returned": second == controlled, "refused": refused,
            "model_version": -1 if m2 is None else m2, "index_version": -1 if i2 is None else i2,
            "resolve_us": rt.mechanism_ns / 1000.0}, to_history(rt.ops, history_meta(reg, contracts))


def open_world_store(options: Options, name: str, seed: int) -> str | None:
    """A folder for Qdrant's local mode under the run's scratch if ``options.extra["qdrant"] == "disk"``
    (None, the default: in memory, ``QdrantClient(":memory:")``, the same engine without the file I/O)."""
    if options.scratch is None or options.extra.get("qdrant") != "disk":
        return None
    folder = Path(options.scratch) / f"qdrant_{name}_{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


class IsolationRetrieval(Experiment):
    name = "isolation_retrieval"
    family = "isolation"
    description = "Figure 1: the paused retrieval workflow after an embedding-model deployment, real Qdrant, per profile"
    artifacts = (artifact("isolation_retrieval"),)
    uses_user_scenarios = False
    seconds_per_execution = 0.005

    def profiles(self, options: Options) -> tuple[str, ...]:
        return tuple(options.mechanisms_for("isolation") or DEFAULT_PROFILES)

    def check(self, options: Options) -> None:
        for p in self.profiles(options):
            resolve(p, "isolation")
        reps = options.extra.get("repetitions")
        if reps is not None and reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        return [Cell(self.name, (("profile", p), ("contract", "declared")), reps, seed) for p in self.profiles(options)]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        p = cell.p["profile"]
        mechanism = resolve(p, "isolation")()
        corpus_seed = derive_seed(cell.seed, "corpus")  # same corpus for every profile
        world = RetrievalWorld(DOCUMENTS, corpus_seed, open_world_store(options, self.name, derive_seed(cell.seed, p)),
                               index_versions=(1,))
        rows, histories = [], []
        try:
            for rep in range(cell.repetitions):
                seed = derive_seed(cell.seed, "retrieval", rep)  # same controlled document for every profile
                rng = random.Random(seed)
                controlled = rng.randrange(DOCUMENTS)
                fields, h = figure1(world, mechanism, controlled, query_for(controlled, rng), f"{p}/{rep}")
                rows.append({"repetition": rep, "seed": seed,
                             "documents": DOCUMENTS, **fields})
                histories.append(h)
        finally:
            world.close()
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, combine(histories, profile=p))
