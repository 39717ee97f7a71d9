"""pytest-benchmark microbenchmarks, one folder per family, run by the latency experiments in a child interpreter."""
