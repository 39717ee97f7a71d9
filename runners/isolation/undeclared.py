"""Undeclared contracts: the reviewers' falsifier, with a fail-closed policy and contract inference (beyond the paper).

C1 enforces *declared* contracts only ("SemIso enforces but does not infer
them", paper §4).  The skeptic's concrete test: run the Figure 1 workflow
under SSI with the index->model contract (a) declared, (b) omitted,
(c) stale, and see whether SSI admits the wrong document.  The workflow
binds one resource, pauses (parked for approval), a deployment lands, and
on resume it binds the other resource for the first time and queries:

- ``declared``/``omitted``: before the pause T1 reads the controlled
  document by id from ``index:docs`` (binding index@1); embedding model 2
  is deployed; on resume T1 binds ``model:embed`` (new) and queries.
  Contracts: ``index:docs@1 requires model:embed@1`` and ``index:docs@2
  requires model:embed@2``, or none at all.
- ``stale``: before the pause T1 embeds its question (binding model@1);
  the index is rebuilt with model 2 and deployed as index@2 (model 2 too);
  the owners copied the old contract forward, so the registry says
  ``index:docs@2 requires model:embed@1``.  On resume T1 binds the index
  (new) and queries.

Policies on top of SSI: ``none``; ``fail_closed`` (a version no declared
contract covers is re-bound to one that is covered, else refused); and
``inference`` (canary embeddings stored beside each index version are
re-embedded with the candidate model: a change of space behind the same
dimension shows as a low cosine).  Records: whether a wrong document was
admitted, whether the workflow was refused, and ``overhead_us``: the time
spent inside the mechanism's resolutions (probes included) per execution.
"""
from __future__ import annotations

import random

from mechanisms import resolve
from runners.experiment import Cell, CellOutput, DriftlabError, Experiment, Options, artifact, derive_seed
from runners.isolation.retrieval import DOCUMENTS, open_world_store, search
from runners.isolation.retrieval_workflow import RetrievalWorld, embed, query_for
from runners.isolation.workflow_runtime import Runtime, combine, history_meta, to_history
from vocabulary.isolation import Contract, Contracts, Registry

C = Contract.parse
#: contract mode -> (declared contracts, resource bound before the pause, deployments during it, bound after)
MODES = {
    "declared": ((C("index:docs@1 requires model:embed@1"), C("index:docs@2 requires model:embed@2")),
                 "index:docs", (("model:embed", 2),), "model:embed"),
    "omitted": ((), "index:docs", (("model:embed", 2),), "model:embed"),
    "stale": ((C("index:docs@1 requires model:embed@1"), C("index:docs@2 requires model:embed@1")),
              "model:embed", (("index:docs", 2), ("model:embed", 2)), "index:docs"),
}
#: what the checkers judge by: the contracts that are true of the lab's embedders and indexes
TRUE_CONTRACTS = (C("index:docs@1 requires model:embed@1"), C("index:docs@2 requires model:embed@2"))
POLICIES = {"none": "SSI", "fail_closed": "SSI+fail_closed", "inference": "SSI+inference"}
REPETITIONS = {"quick": 10, "paper": 200}


def undeclared_run(world: RetrievalWorld, mechanism, mode: str, controlled: int, text: str, group) -> tuple[dict, object]:
    declared, before, deployments, after = MODES[mode]
    reg = Registry({"model:embed": [1, 2], "index:docs": [1, 2]}, {"model:embed": 1, "index:docs": 1},
                   Contracts(declared), probe=world.probe)
    rt = Runtime(reg, mechanism, group=group)
    rt.start("T1")
    bound = {before: rt.resolve("T1", before)}
    if before == "index:docs" and bound[before] is not None:
        rt.note("T1", "fetch", index=bound[before], doc=controlled, text=world.fetch(bound[before], controlled))
    elif bound[before] is not None:
        embed(bound[before], text)  # the question's embedding, kept in the workflow's state
        rt.note("T1", "embed", model=bound[before])
    rt.pause("T1")
    for identity, version in deployments:
        rt.deploy(identity, version)
    rt.resume("T1")
    if bound[before] is not None:
        bound[after] = rt.resolve("T1", after)
    returned = search(world, bound.get("index:docs"), bound.get("model:embed"), text)
    rt.note("T1", "query", index=bound.get("index:docs"), model=bound.get("model:embed"), returned=returned)
    rt.end("T1")
    refused = returned is None
    return {"controlled_doc": controlled, "returned_doc": -1 if returned is None else returned,
            "controlled_document_returned": returned == controlled,
            "wrong_document_admitted": (not refused) and returned != controlled, "refused": refused,
            "model_version": bound.get("model:embed") or -1, "index_version": bound.get("index:docs") or -1,
            "overhead_us": rt.mechanism_ns / 1000.0}, to_history(rt.ops, history_meta(reg, TRUE_CONTRACTS))


class IsolationUndeclared(Experiment):
    name = "isolation_undeclared"
    family = "isolation"
    description = "the retrieval workflow with the contract declared / omitted / stale: SSI alone, fail-closed, inference"
    artifacts = (artifact("isolation_undeclared"),)
    uses_user_scenarios = False
    seconds_per_execution = 0.005
    uses_mechanisms = False

    def check(self, options: Options) -> None:
        for m in POLICIES.values():
            resolve(m, "isolation")
        reps = options.extra.get("repetitions")
        if reps is not None and reps < 1:
            raise DriftlabError(f"--repetitions must be at least 1, got {reps}")

    def cells(self, profile: str, seed: int, options: Options) -> list[Cell]:
        reps = options.extra.get("repetitions") or REPETITIONS[profile]
        return [Cell(self.name, (("contract", c), ("policy", p)), reps, seed) for c in MODES for p in POLICIES]

    def run_cell(self, cell: Cell, options: Options) -> CellOutput:
        mode, policy = cell.p["contract"], cell.p["policy"]
        mechanism = resolve(POLICIES[policy], "isolation")()
        world = RetrievalWorld(DOCUMENTS, derive_seed(cell.seed, "corpus"),
                               open_world_store(options, self.name, derive_seed(cell.seed, mode, policy)))
        rows, histories = [], []
        try:
            for rep in range(cell.repetitions):
                seed = derive_seed(cell.seed, "undeclared", rep)  # same documents for every mode and policy
                rng = random.Random(seed)
                controlled = rng.randrange(DOCUMENTS)
                fields, h = undeclared_run(world, mechanism, mode, controlled, query_for(controlled, rng),
                                           f"{mode}/{policy}/{rep}")
                rows.append({"mechanism_name": mechanism.name, "repetition": rep,
                             "seed": seed, **fields})
                histories.append(h)
        finally:
            world.close()
        return CellOutput({k: [r[k] for r in rows] for k in rows[0]}, combine(histories, contract=mode, policy=policy))
