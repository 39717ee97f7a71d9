"""Resume semantics faults: SIGKILL at named points, k concurrent resumers."""
