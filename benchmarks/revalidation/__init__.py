"""Decision revalidation benchmarks: controlled validation, latency vs recorded reads."""
