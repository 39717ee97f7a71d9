"""Fault injectors, by name (``driftlab list`` shows them).

A fault perturbs an execution from outside the mechanism under test:
dependency omission, races, SIGKILL at a named point, concurrent resume.
"""
FAULTS: dict[str, str] = {
    "mutation": "a second actor's change to business state, landing at a schedule's lifecycle point (scenarios/)",
    "check_to_commit": "a change between validation and commit (schedule s5): only target-side binding catches it",
    "race": "two workers commit the same checked intent at one instant; or the policy turns false between validation and commit (faults/revalidation/races.py)",
    "dependency_omission": "drop the change's sole critical dependency edge with probability p before validation (faults/revalidation/omission.py)",
    "conservative_linking": "mitigation: link every supplied input (recorded read) to every premise (faults/revalidation/omission.py)",
    "contract_omission": "drop each declared isolation contract with probability p before an execution; SSI then admits what the dropped contract forbade (faults/isolation/contract_omission.py)",
    "sigkill": "SIGKILL of a runtime's child process at a named injection point, recovery in a fresh process (faults/resume/sigkill.py)",
    "concurrent_resume": "k processes resume one parked interrupt: a barrier, then a seeded start jitter (faults/resume/concurrent_resume.py)",
    "power_loss": "every byte written and not fsynced is lost; the lab's lazy FUSE file system is remounted (faults/resume/powerloss.py)",
    "torn": "the newest unsynced write keeps its prefix to a 4 KiB boundary, the rest unsynced is lost (faults/resume/powerloss.py)",
    "flush": "everything unsynced reaches the disk, as the OS does in the background: a run parked long ago (faults/resume/powerloss.py)",
}
