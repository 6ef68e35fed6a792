"""The `cpu` backend: a vectorised PTX interpreter in numpy that runs a launch description.

    record, buffers = run_cpu(LAUNCH_DIR, mma="sm_90")

The module is decoded once (`program`), each statement compiled once into a closure
(`semantics`), and the grid run a chunk of blocks at a time (`machine`), every thread of the chunk
a lane of numpy arrays. The `mma` accumulation is a model from `rr.numerics.MMA_MODELS`; the
record says which, since the GPU's tensor core rounds differently (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from rr import numerics as nx
from rr.ptx._bulk import no_gc
from rr.run.cpu.machine import BUFFER_SHIFT, HANDLE_BASE, ExecutionError, Machine
from rr.run.cpu.program import DecodeError, decode
from rr.run.cpu.semantics import Ctx, Unsupported, compile_op, fuse_mma_runs
from rr.run.launch import LaunchError, load_buffers, module_kind, param_images, read_launch

MAX_LANES = 1 << 17  # threads per chunk of blocks: bounds the registers' memory


class CpuUnsupported(RuntimeError):
    """The module uses something the interpreter does not implement (named in the message)."""


def prepare(module_text: str, entry: str):
    """Decode and compile a module's entry once: (program, ctx). Without the cyclic collector:
    the statements, their operands and closures are tens of thousands of small objects whose
    collection passes cost a third of the time (their cycles, op ↔ closure, go with the program)."""
    from rr.describe.provenance import param_offsets
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
    from rr.ptx.parser import decode_text
    from rr.validation import read_bytes

    t0 = time.perf_counter()
    image = read_bytes(module, error=LaunchError)  # a regular file, read once
    kind = module_kind(image, module)
    if kind != "ptx":
        raise CpuUnsupported(f"{module}: the cpu backend runs PTX, not a {kind}")
    program, ctx = prepare(decode_text(image, module), launch.entry)

    handles, buffers, images = {}, [], []
    for f in launch.fields + launch.extra:
        if f.kind == "buffer" and f.buffer not in handles:
            handles[f.buffer] = (len(buffers) + 1) << BUFFER_SHIFT
            buffers.append(np.ascontiguousarray(arrays[f.buffer]).reshape(-1).view(np.uint8))
        elif f.kind in ("texture", "surface") and f.buffer not in handles:
            handles[f.buffer] = HANDLE_BASE + len(images)
            images.append((arrays[f.buffer], f.kind == "surface"))
    space = bytearray(sum(p.size for p in program.kernel_params) + 64)
    for p, image in zip(program.kernel_params, param_images(launch, handles)):
        at = ctx.param_offsets[p.name]
        space[at:at + len(image)] = image
    grid, block = launch.grid, launch.block
    total = grid[0] * grid[1] * grid[2]
    per = max(1, max_lanes // (-(-(block[0] * block[1] * block[2]) // 32) * 32))
    mma = mma or nx.DEFAULT_MMA
    model = nx.MMA_MODELS[mma]
    module_globals = program.globals_image.copy()  # global memory: one image for every chunk of blocks
    t1 = time.perf_counter()
    unwritten: dict = {}
    lanes = lane_steps = 0
    with np.errstate(all="ignore"), no_gc():  # the run makes no cycles; the program's objects need no passes
        for start in range(0, total, per):
            blocks = np.arange(start, min(start + per, total))
            m = Machine(program, blocks, grid, block, bytes(space), buffers, images, model, module_globals)
            if progress:
                print(f"rr run --backend cpu: blocks {start}–{blocks[-1]} of {total}", file=sys.stderr, flush=True)
            m.run()
            lanes += m.n
            lane_steps += m.lane_steps
            unwritten.update({k: v for k, v in m.unwritten.items() if k not in unwritten})
    t2 = time.perf_counter()
    record = {"status": "ok", "message": "", "backend": "cpu",
              "device": {"name": "rr PTX interpreter (numpy)", "mma_model": mma},
              "statements": len(program.ops), "lanes": lanes, "lane_statements": lane_steps,
              "unwritten_registers": [f"{r} first read at {w}" for r, w in sorted(unwritten.items())],
              "times_ms": {"prepare": (t1 - t0) * 1e3, "run": (t2 - t1) * 1e3}}
    return record


__all__ = ["run_cpu", "run_cpu_launch", "prepare", "CpuUnsupported", "ExecutionError"]
