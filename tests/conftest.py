"""Shared fixtures: PTX made by nvcc at test time from the CUDA sources in tests/cuda/."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CUDA_DIR = Path(__file__).parent / "cuda"
NVCC = shutil.which("nvcc")
PTXAS = shutil.which("ptxas")

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH: install the CUDA toolkit "
                                "(or the nvidia-cuda-nvcc wheel) to compile the test kernels")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH")


def pytest_xdist_auto_num_workers(config) -> int:
    """How many processes `-n auto` (pyproject's addopts) runs the test files in: one more than the
    cores (the SLURM test's worker is mostly waiting for status checks), at most four; none (all in
    this process) for a run that selects the GPU tests, which share one GPU and must not time their
    kernels against each other's."""
    if "gpu" in (config.option.markexpr or "") and "not gpu" not in config.option.markexpr:
        return 0
    return min(4, len(os.sched_getaffinity(0)) + 1)


# the files whose tests take longest, begun first so that the other workers run the rest beside
# them (most of the SLURM test is waiting for status checks); the others keep their order
FIRST = ("test_slurm.py", "test_workflow.py", "test_report_browser.py")


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        return FIRST.index(name) if name in FIRST else len(FIRST)

    items.sort(key=rank)  # stable: each file's tests stay together and in order


def run_ptxas(ptx: Path, arch: str = "sm_90", *flags: str) -> subprocess.CompletedProcess:
    """ptxas on a PTX file (the cubin goes beside it); the result, for its status and messages."""
    return subprocess.run([PTXAS, f"-arch={arch}", *flags, str(ptx), "-o", str(Path(ptx).with_suffix(".cubin"))],
                          capture_output=True, text=True, check=False)


@pytest.fixture(scope="session")
def nvcc_ptx(tmp_path_factory):
    """nvcc_ptx('mma_chain', '-DM_TILES=4') → Path of the PTX nvcc makes for tests/cuda/mma_chain.cu."""
    if NVCC is None:
        pytest.skip("nvcc is not on PATH: install the CUDA toolkit to compile the test kernels")
    out_dir = tmp_path_factory.mktemp("nvcc")
    cache: dict = {}

    def build(name: str, *flags: str, arch: str = "sm_90") -> Path:
        key = (name, flags, arch)
        if key not in cache:
            tag = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
            out = out_dir / f"{name.replace('/', '_')}-{tag}.ptx"  # nvvm/x: a kernel in a subdirectory
            subprocess.run([NVCC, "-ptx", f"-arch={arch}", *flags, str(CUDA_DIR / f"{name}.cu"),
                            "-o", str(out)], check=True, capture_output=True)
            cache[key] = out
        return cache[key]

    return build


ALL_KERNELS = [("mma_chain", ()), ("tex_surf", ()), ("shuffles", ()), ("movmatrix", ()),
               ("branches", ()), ("branches", ("-G",))]


@pytest.fixture(scope="session")
def gpu():
    """The GPU's description; skips the test, with the reason, where there is none."""
    from rr.run.cuda import NoDevice, device_info

    try:
        return device_info()
    except NoDevice as e:
        pytest.skip(f"needs an NVIDIA GPU with cupy: {e}")
