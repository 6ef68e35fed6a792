"""Running kernels: launch descriptions and frames, compile (ptxas), the CUDA backend and the cpu
backend (a PTX interpreter), fault isolation (a child process per run, or a GPU's long-lived
worker), comparison of runs, timing and measuring a cell."""
