"""The paper's LangGraph 1.2.9 findings beside the installed release, from this run's resume tables.

Serves "Resume Means Resume" (arXiv 2608.03836), whose abstract reports four
findings on LangGraph 1.2.9 (``data/reference/resume.toml`` ``[langgraph]``):
a second resume value recorded and never consulted (CO); schema-invalid state
persisted silently (CV); durably recorded work re-executed after a real
SIGKILL (EO); saturation 1.0 in most concurrent-resume cells (the published
count is in the reference file, never here).  This run
measures the installed release as the ``langgraph`` runtime row, and the
guard as ``langgraph+guard``.  Every "ours" below is computed from the tables
of ``resume_faults`` and ``resume_concurrency`` (pure functions of records);
where today's release behaves differently from 1.2.9, the note says so.

Call :func:`note` from a report section with the tables it has (e.g.
``note(faults=tab)`` in ``resume_faults``, ``note(concurrency=tab)`` in
``resume_concurrency``): one paragraph on the findings those tables measure,
"" when they have no LangGraph rows.  :func:`section` makes a section of its
own from both tables.
"""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from importlib import metadata

import pandas as pd

from analysis.reference import reference
from analysis.report import Section, row

STOCK, GUARD = "langgraph", "langgraph+guard"
PACKAGES = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres")


@dataclass(frozen=True)
class Finding:
    id: str
    claim: str  # the paper's words (1.2.9)
    measured: str  # what this run measured on the installed release
    reproduced: bool | None  # None: this run has no cell that tests it


def installed_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _cells(faults: pd.DataFrame, runtime: str, patterns: list[str], prop: str) -> pd.DataFrame:
    t = faults[(faults["runtime"] == runtime) & (faults["property"] == prop)]
    return t[t["cell"].map(lambda c: any(fnmatch(c, p) for p in patterns))]


def _fault_finding(faults: pd.DataFrame, spec: dict) -> Finding:
    t = _cells(faults, STOCK, spec["cells"], spec["property"])
    if t.empty:
        return Finding(spec["id"], spec["claim"], "not measured in this run", None)
    bad = t[t["verdict"] == "invalid"]
    measured = (f"{spec['property']} violated in {len(bad)} of {len(t)} cell(s)"
                + (f" ({', '.join(bad['cell'])})" if len(bad) <= 6 and len(bad) else ""))
    if len(bad):
        measured += f"; e.g. {bad['witness'].iloc[0]}"
    return Finding(spec["id"], spec["claim"], measured, bool(len(bad)))


def paper_version() -> str:
    """The LangGraph release the paper measured (``data/reference/resume.toml``)."""
    return reference("langgraph")["version"]


def _by_id_note(faults: pd.DataFrame) -> str:
    t = faults[(faults["runtime"] == STOCK) & (faults["cell"] == "second_resume_by_id")]
    if t.empty:
        return ""
    bad = sorted(t.loc[t["verdict"] == "invalid", "property"])
    if not bad:
        return "A resume addressed to the parked checkpoint's id conforms."
    fired = t["effects_fired"].iloc[0]
    return (f"Beyond {paper_version()}'s findings: a resume addressed to the parked checkpoint's id re-runs the nodes after the "
            f"interrupt (with the first value; the new one is recorded and not consulted): {', '.join(bad)} violated, "
            f"{fired:g} effects fired where {int(t['effects_expected'].iloc[0])} are expected.")


def _saturation_finding(conc: pd.DataFrame, ref: dict) -> Finding:
    claim = next(f["claim"] for f in ref["findings"] if f["id"] == "saturation")
    t = conc[conc["runtime"] == STOCK]
    if t.empty:
        return Finding("saturation", claim, "not measured in this run", None)
    sat = t[t["saturation"] >= 0.999]
    low = t[t["saturation"] < 0.999]
    measured = f"saturation 1.0 in {len(sat)} of {len(t)} cells"
    if len(low):
        measured += " (below 1.0: " + ", ".join(f"{b} k={k} {j:g} ms: {s:.3g}" for b, k, j, s in
                                               zip(low["backend"], low["k"], low["jitter_ms"], low["saturation"])) + ")"
    published = reference("resume_concurrency").get("values", [])
    mine = {(b, int(k), float(j)): s for b, k, j, s in zip(t["backend"], t["k"], t["jitter_ms"], t["saturation"])}
    beside = [f"{v['backend']} k={v['k']} {v['jitter_ms']:g} ms: paper {v['saturation']:g}, ours "
              f"{mine[(v['backend'], int(v['k']), float(v['jitter_ms']))]:.3g}" for v in published
              if (v["backend"], int(v["k"]), float(v["jitter_ms"])) in mine]
    if beside:
        measured += "; the paper's exceptions: " + "; ".join(beside)
    same = len(sat) >= ref["concurrency_cells_saturated"] * len(t) / ref["concurrency_cells"]
    return Finding("saturation", claim, measured, bool(len(sat)) and same)


def findings(faults: pd.DataFrame | None, concurrency: pd.DataFrame | None) -> list[Finding]:
    """The four findings, each with what this run measured (faults/concurrency: the artifacts' tables)."""
    ref = reference("langgraph")
    out = []
    for spec in ref.get("findings", []):
        if spec["id"] == "saturation":
            out.append(_saturation_finding(concurrency if concurrency is not None else pd.DataFrame(
                columns=["runtime"]), ref))
        elif faults is not None and not faults.empty:
            out.append(_fault_finding(faults, spec))
        else:
            out.append(Finding(spec["id"], spec["claim"], "not measured in this run", None))
    return out


def guard_summary(faults: pd.DataFrame | None, concurrency: pd.DataFrame | None) -> list[str]:
    """What langgraph+guard holds where stock LangGraph does not (computed from the same tables)."""
    lines = []
    if faults is not None and not faults.empty and (faults["runtime"] == GUARD).any():
        stock_bad = faults[(faults["runtime"] == STOCK) & (faults["verdict"] == "invalid")]
        pairs = set(zip(stock_bad["cell"], stock_bad["property"]))
        g = faults[faults["runtime"] == GUARD]
        fixed = [(c, p) for c, p, v in zip(g["cell"], g["property"], g["verdict"]) if (c, p) in pairs and v == "valid"]
        still = sorted({f"{c}:{p}" for c, p, v in zip(g["cell"], g["property"], g["verdict"]) if v == "invalid"})
        lines.append(f"langgraph+guard holds {len(fixed)} of the {len(pairs)} cell x property violations of stock "
                     f"LangGraph" + (f"; it still violates {', '.join(still)}" if still else "") + ".")
    if concurrency is not None and not concurrency.empty and (concurrency["runtime"] == GUARD).any():
        g = concurrency[concurrency["runtime"] == GUARD]
        dup = int((g["effects_fired_mean"] > 1.0).sum())
        lines.append(f"langgraph+guard in resume_concurrency: {len(g)} cells, {dup} with more than one gated effect "
                     f"per race, served per race {g['served_mean'].min():g}..{g['served_mean'].max():g}.")
    return lines


REMIT = "langgraph+remit"


def remit_faults(faults: pd.DataFrame, records: pd.DataFrame) -> str:
    """LangGraph + REMIT beside LangGraph + guard in the fault matrix, with both readings of CO (issue 14 §3).

    Per guard: the cell x property pairs it violates; the pairs REMIT holds and the guard does not (the aim: none);
    and every cell where REMIT's reading of consume-once (``co_inert``: a stray second resume accepted with no
    effect conforms) and the lab's CO (it must be refused) disagree, with both verdicts named."""
    if faults is None or faults.empty or not (faults["runtime"] == REMIT).any():
        return ""
    bad = {rt: {(c, p) for c, p, v in zip(t["cell"], t["property"], t["verdict"]) if v == "invalid"}
           for rt, t in faults.groupby("runtime") if rt in (GUARD, REMIT)}
    parts = [f"LangGraph + REMIT (remit-contract {reference('remit').get('version', '?')}, cross-process gate on, as "
             f"its authors recommend for concurrent resumers) violates {len(bad.get(REMIT, ()))} cell x property "
             f"pair(s)" + (f" ({', '.join(f'{c}:{p}' for c, p in sorted(bad[REMIT]))})" if bad.get(REMIT) else "")]
    if GUARD in bad:
        worse = sorted(bad[GUARD] - bad[REMIT])
        parts.append(f"LangGraph + guard violates {len(bad[GUARD])}; pairs REMIT holds and the guard does not: "
                     + (", ".join(f"{c}:{p}" for c, p in worse) if worse else "none"))
    if "co_inert" in records:
        co = records[(records["runtime"].isin([GUARD, REMIT])) & (records["property"] == "CO")
                     & (records["verdict"] != "not applicable")]
        differ = co.groupby(["runtime", "fault_cell"]).agg(lab=("verdict", lambda v: "invalid" if "invalid" in set(v)
                                                                else "valid"),
                                                           inert=("co_inert", lambda v: "invalid" if "invalid" in set(v)
                                                                  else "valid"))
        differ = differ[differ["lab"] != differ["inert"]]
        if len(differ):
            parts.append("CO read two ways (the lab's CO: a second resume of a consumed interrupt must be refused; "
                         "REMIT's: it may be accepted inert, with no effect): " + "; ".join(
                             f"{rt} {cell}: lab CO {r.lab}, REMIT's reading {r.inert}"
                             for (rt, cell), r in differ.iterrows()))
    return ". ".join(parts) + "."


def remit_races(concurrency: pd.DataFrame, records: pd.DataFrame) -> str:
    """LangGraph + REMIT beside LangGraph + guard in the concurrency grid, and REMIT's own published claim."""
    if concurrency is None or concurrency.empty or not (concurrency["runtime"] == REMIT).any():
        return ""
    ref = reference("remit")
    parts = []
    for rt in (GUARD, REMIT):
        t = concurrency[concurrency["runtime"] == rt]
        if t.empty:
            continue
        once = int((t["effects_fired_mean"] <= 1.0).sum())
        parts.append(f"{rt}: the gated effect fired at most once per race in {once} of {len(t)} cells, served per "
                     f"race {t['served_mean'].min():g}..{t['served_mean'].max():g}, refused per race "
                     f"{t['refused_mean'].min():g}..{t['refused_mean'].max():g}")
    k2 = records[(records["runtime"] == REMIT) & (records["k"] == 2)]
    if len(k2) and ref:
        parts.append(f"REMIT's own claim ({ref['source']}): two concurrent resumers fire the gated effect once in "
                     f"{ref['gate_runs_once']} of {ref['gate_runs']} runs; this run, k = 2: once in "
                     f"{int((k2['effects_fired'] == 1).sum())} of {len(k2)} races, the loser refused in "
                     f"{int((k2['refused'] >= 1).sum())}")
    return ". ".join(parts) + "."


def note(faults: pd.DataFrame | None = None, concurrency: pd.DataFrame | None = None) -> str:
    """One paragraph for the resume report: the paper's 1.2.9 findings beside this run ("" without LangGraph rows)."""
    has = lambda t: t is not None and not t.empty and (t["runtime"] == STOCK).any()  # noqa: E731
    if not (has(faults) or has(concurrency)):
        return ""
    v = installed_versions()
    parts = [f"LangGraph: the paper measured {paper_version()}; this run measured "
             f"langgraph {v['langgraph']} (checkpoint {v['langgraph-checkpoint']}, sqlite saver "
             f"{v['langgraph-checkpoint-sqlite']}, postgres saver {v['langgraph-checkpoint-postgres']})."]
    for f in findings(faults, concurrency):
        if f.reproduced is None:  # e.g. the concurrency finding in the fault matrix's section
            continue
        verdict = "reproduced" if f.reproduced else f"DIFFERS from {paper_version()}"
        parts.append(f"Paper: \"{f.claim}\". Today: {f.measured} ({verdict}).")
    if faults is not None and not faults.empty:
        if extra := _by_id_note(faults):
            parts.append(extra)
    parts += guard_summary(faults, concurrency)
    return " ".join(parts)


def overhead_ratios(benchmark_json: dict) -> pd.DataFrame:
    """Stack / stock ratios per backend, operation and stack (``bench_langgraph_guard.py``'s JSON).

    The stacks are driftlab_guard's layer 1 alone (``guard``) and its three layers
    (``full``).  Each repetition times every stack back to back; its ratio is
    the stack's median over the stock saver's median, so drift of a shared
    machine between repetitions cancels.  ``ratio`` is the median of the
    repetitions' ratios (``ratio_min``/``ratio_max`` their spread);
    ``stock_us``/``stack_us`` the medians of the repetitions' medians.  The aim
    is a ratio of at most 1.2 for the full stack.
    """
    rows = [{**b["extra_info"], "median_us": b["stats"]["median"] * 1e6} for b in benchmark_json.get("benchmarks", [])
            if "saver" in b.get("extra_info", {})]
    cols = ["backend", "operation", "stack", "stock_us", "stack_us", "ratio", "ratio_min", "ratio_max", "repetitions"]
    if not rows:
        return pd.DataFrame(columns=cols)
    per = pd.DataFrame(rows).pivot_table(index=["backend", "operation", "repetition"], columns="saver",
                                         values="median_us").reset_index()
    parts = []
    for stack in sorted(c for c in per.columns if c not in ("backend", "operation", "repetition", "stock")):
        one = per.dropna(subset=["stock", stack]).assign(stack=stack, stack_us=lambda d: d[stack])
        one["ratio"] = one["stack_us"] / one["stock"]
        parts.append(one.groupby(["backend", "operation", "stack"]).agg(
            stock_us=("stock", "median"), stack_us=("stack_us", "median"), ratio=("ratio", "median"),
            ratio_min=("ratio", "min"), ratio_max=("ratio", "max"), repetitions=("ratio", "size")).reset_index())
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def section(faults: pd.DataFrame | None, concurrency: pd.DataFrame | None) -> Section:
    """A report section of its own: one row per finding (1 reproduced, 0 differs) and the note."""
    rows = [row(f"{f.id}: {f.claim} (1 = reproduced today)", int(f.reproduced), 1, "count")
            for f in findings(faults, concurrency) if f.reproduced is not None]
    return Section("langgraph_findings", f"LangGraph: the paper's {paper_version()} findings beside the installed release", rows,
                   note(faults, concurrency))
