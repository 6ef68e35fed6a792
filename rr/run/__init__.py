"""Running kernels: launch descriptions, compile (ptxas), the CUDA backend, fault isolation,
comparison of runs and timing."""
