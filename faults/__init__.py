"""Fault injectors, by name (``driftlab list`` shows them).

A fault perturbs an execution from outside the mechanism under test:
dependency omission, races, SIGKILL at a named point, concurrent resume.
"""
FAULTS: dict[str, str] = {
    "mutation": "a second actor's change to business state, landing at a schedule's lifecycle point (scenarios/)",
    "check_to_commit": "a change between validation and commit (schedule s5): only target-side binding catches it",
    # races
    # omission
}
