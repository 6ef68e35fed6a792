"""The `cpu` backend: a vectorised PTX interpreter in numpy that runs a launch description.

    record, buffers = run_cpu(LAUNCH_DIR, mma="sm_90")

The module is decoded once (`program`), each statement compiled once into a closure
(`semantics`), and the grid run a chunk of blocks at a time (`machine`), every thread of the chunk
a lane of numpy arrays, as many blocks as the kernel's memory lets a chunk hold (`memory`: a
kernel that asks more than its limit is a ResourceLimit, the run's `resource` status). The `mma`
accumulation is a model from `rr.numerics.mma.MMA_MODELS`, by default the H200's own arithmetic
(bit-exact on its probes; `exact` rounds the whole sum once, as the GPU does not): the record says
which (docs/numerics.md).
"""

from __future__ import annotations

import dataclasses

import sys
import time
from pathlib import Path

import numpy as np

from rr.numerics.mma import DEFAULT_MMA, MMA_MODELS
from rr.ptx._bulk import no_gc
from rr.records import Status
from rr.run.cpu.machine import BUFFER_SHIFT, HANDLE_BASE, ExecutionError, Machine
from rr.run.cpu.memory import ResourceLimit, blocks_per_chunk, heap_kept
from rr.run.cpu.program import DecodeError, decode
from rr.run.cpu.semantics import Ctx, Unsupported, compile_op, fuse_mma_runs
from rr.run.launch import LaunchError, load_buffers, module_kind, param_images, read_launch

MAX_LANES = 1 << 17  # threads per chunk of blocks: bounds the registers' memory (the state spaces': .memory)


class CpuUnsupported(RuntimeError):
    """The module uses something the interpreter does not implement (named in the message)."""


def prepare(module_text: str, entry: str):
    """Decode and compile a module's entry once: (program, ctx). Without the cyclic collector:
    the statements, their operands and closures are tens of thousands of small objects whose
    collection passes cost a third of the time (their cycles, op ↔ closure, go with the program)."""
    from rr.describe.kernel import param_offsets
    from rr.ptx import parse

    with no_gc():
        try:
            program = decode(parse(module_text, "kernel.ptx"), entry)
        except DecodeError as e:
            raise CpuUnsupported(str(e)) from None
        ctx = Ctx(program, param_offsets(program.kernel_params))
        try:
            for op in program.ops:
                if op.kind == "plain":
                    op.run = compile_op(op, ctx)
        except Unsupported as e:
            raise CpuUnsupported(str(e)) from None
        fuse_mma_runs(program)
    return program, ctx


# The GPU the interpreter stands for (its mma model is the H200's): of a fatbin's PTX entries, the
# one for the newest architecture up to it is run, else the one for the oldest above it.
CPU_ARCH = 90


def module_ptx(module: Path, entry: str) -> str:
    """The PTX text the cpu backend runs for a module file: PTX as it is; from a fatbin (what a
    program loads, as `rr capture` stores it), its PTX entry that defines `entry`, for the
    architecture nearest CPU_ARCH. A module with no PTX of `entry` — a cubin, a fatbin of SASS
    alone — is CpuUnsupported naming the two fixes: the PTX given with `rr run --module`, or the
    program rebuilt to embed PTX."""
    from rr.corpus.extract import scan_bytes
    from rr.ptx.parser import decode_text
    from rr.validation import read_bytes

    image = read_bytes(module, error=LaunchError)  # a regular file, read once
    kind = module_kind(image, module)
    if kind == "ptx":
        return decode_text(image, module)
    found = scan_bytes(image, str(module)) if kind == "fatbin" else None
    ptx = [m for m in found.modules if entry in m.entries] if found else []
    if ptx:
        return min(ptx, key=lambda m: _distance(m.arch or 0)).text
    if found and found.modules:
        defined = sorted({e for m in found.modules for e in m.entries})
        raise CpuUnsupported(f"{module}: no PTX in this fatbin defines {entry} (its PTX defines "
                             f"{', '.join(defined) or 'no entry'})")
    sass = _sass_archs(image) if kind == "fatbin" else []
    held = f"a fatbin of SASS only ({', '.join(f'sm_{a}' for a in sass)})" if sass else f"a {kind} (SASS only)"
    damaged = "".join(f"; {w}" for w in found.warnings) if found else ""
    xx = str(sass[-1]) if sass else "XX"
    raise CpuUnsupported(
        f"{module}: {held}, no PTX of {entry}{damaged}: the cpu backend runs PTX. Give it the PTX with `rr run "
        f"LAUNCH --module FILE` (the kernel's .ptx, or the corpus `rr extract` made of the program), or rebuild "
        f"the program to embed PTX beside its SASS: nvcc -gencode arch=compute_{xx},code=[sm_{xx},compute_{xx}]"
        + ("" if sass else " (XX: the GPU's compute capability, 90 for an H200)"))


def _distance(arch: int) -> tuple:
    """How far a PTX entry's architecture is from CPU_ARCH: those up to it first, newest first."""
    return (arch > CPU_ARCH, arch if arch > CPU_ARCH else -arch)


def _sass_archs(image: bytes) -> list[int]:
    """The architectures of the ELF (SASS) entries of the fatbin `image`, for naming them."""
    from rr.corpus.fatbin import KIND_ELF, FatbinEntry, container_end, iter_entries

    try:
        entries = iter_entries(image, 0, container_end(image, 0), kinds=frozenset())
        return sorted({e.arch for e in entries if isinstance(e, FatbinEntry) and e.kind == KIND_ELF})
    except ValueError:  # FatbinError: a header that does not read, already warned of by the scan
        return []


def run_cpu(directory: str | Path, mma: str | None = None, max_lanes: int = MAX_LANES,
            progress: bool = False) -> tuple[dict, dict[str, np.ndarray]]:
    """Run the launch directory's kernel once: (run record, every buffer after the run)."""
    directory = Path(directory)
    launch = read_launch(directory)
    # fresh arrays from disk, written in place through byte views: C order (copied only if not)
    arrays = {k: np.ascontiguousarray(v) for k, v in load_buffers(directory, launch).items()}
    record = run_cpu_launch(launch, directory / launch.module, arrays, mma, max_lanes, progress)
    return record, arrays


def run_cpu_launch(launch, module: Path, arrays: dict[str, np.ndarray], mma: str | None = None,
                   max_lanes: int = MAX_LANES, progress: bool = False) -> dict:
    """Run one launch on `arrays` (C-ordered, by buffer name), which it updates in place — a
    frame passes the same arrays from one layer's launch to the next; returns the run record."""
    t0 = time.perf_counter()
    program, ctx = prepare(module_ptx(Path(module), launch.entry), launch.entry)
    if launch.shared_bytes:  # the launch's dynamic shared memory: an `.extern .shared` array's, after the static
        program = dataclasses.replace(program, shared_bytes=program.shared_bytes + launch.shared_bytes)

    handles, buffers, images = {}, [], []
    for f in launch.fields + launch.extra:
        if f.kind == "buffer" and f.buffer not in handles:
            handles[f.buffer] = (len(buffers) + 1) << BUFFER_SHIFT
            buffers.append(np.ascontiguousarray(arrays[f.buffer]).reshape(-1).view(np.uint8))
        elif f.kind in ("texture", "surface") and f.buffer not in handles:
            handles[f.buffer] = HANDLE_BASE + len(images)
            images.append((arrays[f.buffer], f.kind == "surface"))
    grid, block = launch.grid, launch.block
    total = grid[0] * grid[1] * grid[2]
    lanes = -(-(block[0] * block[1] * block[2]) // 32) * 32  # a block's threads in whole warps
    # as many blocks as the lanes' registers and the state spaces' memory allow (rr.run.cpu.memory)
    per = blocks_per_chunk(program, lanes, max(1, max_lanes // lanes))
    space = bytearray(sum(p.size for p in program.kernel_params) + 64)
    for p, image in zip(program.kernel_params, param_images(launch, handles)):
        at = ctx.param_offsets[p.name]
        space[at:at + len(image)] = image
    mma = mma or DEFAULT_MMA
    model = MMA_MODELS[mma]
    module_globals = program.globals_image.copy()  # global memory: one image for every chunk of blocks
    t1 = time.perf_counter()
    unwritten: dict = {}
    threads = lane_steps = 0
    # the run makes no cycles (the program's objects need no passes), and its temporaries reuse the heap
    with np.errstate(all="ignore"), no_gc(), heap_kept():
        for start in range(0, total, per):
            blocks = np.arange(start, min(start + per, total))
            m = Machine(program, blocks, grid, block, bytes(space), buffers, images, model, module_globals)
            if progress:
                print(f"rr run --backend cpu: blocks {start}–{blocks[-1]} of {total}", file=sys.stderr, flush=True)
            m.run()
            threads += m.n
            lane_steps += m.lane_steps
            unwritten.update({k: v for k, v in m.unwritten.items() if k not in unwritten})
    t2 = time.perf_counter()
    record = {"status": Status.OK, "message": "", "backend": "cpu",
              "device": {"name": "rr PTX interpreter (numpy)", "mma_model": mma},
              "statements": len(program.ops), "lanes": threads, "lane_statements": lane_steps,
              "unwritten_registers": [f"{r} first read at {w}" for r, w in sorted(unwritten.items())],
              "times_ms": {"prepare": (t1 - t0) * 1e3, "run": (t2 - t1) * 1e3}}
    return record


__all__ = ["run_cpu", "run_cpu_launch", "prepare", "module_ptx", "CpuUnsupported", "ExecutionError", "ResourceLimit"]
