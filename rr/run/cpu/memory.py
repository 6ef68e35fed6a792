"""The cpu backend's memory bound: what the interpreter allocates for a kernel's state spaces is
checked against a limit before it is allocated.

A kernel declares its memory — a `.local .b8 depot[1073741824]` is a GiB for every thread, a
`.global` array of 16 GiB is 16 GiB — and the interpreter holds it in numpy arrays: a `.local`
window and call-parameter memory per thread of a chunk of blocks, a `.shared` window per block,
the module's `.global` and `.const` images and the kernel's parameter image once. Those sizes are
known before anything is allocated, so a kernel that asks more than the limit is refused then
(ResourceLimit, the run's `resource` status, naming the space and the size asked for) instead of
asking the machine for it. A chunk holds as few blocks as its memory needs (one at least), so a
large local depot costs time, not a refusal, while one block fits.

The limit is $RR_CPU_MEMORY_BYTES where set, else half the memory available when the run starts
(MemAvailable) and at most DEFAULT_LIMIT. The registers, which grow with the chunk's lanes, are
bounded by the chunk's lane count (rr.run.cpu.MAX_LANES), not here, and the buffers are the
launch directory's files, as large as they are on disk.
"""

from __future__ import annotations

import os

DEFAULT_LIMIT = 4 << 30
LIMIT_ENV = "RR_CPU_MEMORY_BYTES"


class ResourceLimit(RuntimeError):
    """A kernel whose memory is more than the interpreter allocates; the message names the state
    space and the size asked for."""


def limit() -> int:
    """The bytes the interpreter may allocate for one launch's state spaces."""
    if os.environ.get(LIMIT_ENV):
        return int(os.environ[LIMIT_ENV])
    return min(DEFAULT_LIMIT, _available() // 2)


def _available() -> int:
    """The memory the kernel says can be had without swapping (MemAvailable), else the free pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def refused(space: str, asked: str, bound: int) -> ResourceLimit:
    """The error of a space whose memory (`asked`: how much, in words) is more than `bound`."""
    return ResourceLimit(f"the kernel's {space} memory is {asked}, more than the cpu backend allocates "
                         f"({bound} bytes; ${LIMIT_ENV} sets the limit)")


def check(space: str, size: int, bound: int, what: str = "") -> None:
    """ResourceLimit where `size` bytes of `space` (`what`: which of it, in words) are more than `bound`."""
    if size > bound:
        raise refused(space, f"{size} bytes{what}", bound)


def blocks_per_chunk(program, lanes: int, wanted: int) -> int:
    """How many blocks of `lanes` threads a chunk may hold: `wanted` or fewer, so that its memory
    — each block's `.local` and call-`.param` memory (a thread's times its lanes) and `.shared`
    window — fits the limit beside what the launch holds once (the module's `.global` and `.const`
    images, the kernel's parameters); ResourceLimit naming the largest where one block does not."""
    bound = limit()
    local, shared, calls = program.local_bytes, program.shared_bytes, sum(program.param_sizes.values())
    params = sum(p.size for p in program.kernel_params)
    block = f"for a block of {lanes} threads"
    needs = [  # (space, bytes, how much in words, once a launch?)
        (".global", program.globals_image.nbytes, f"{program.globals_image.nbytes} bytes", True),
        (".const", program.const_image.nbytes, f"{program.const_image.nbytes} bytes", True),
        (".param", params, f"{params} bytes of kernel parameters", True),
        (".local", lanes * local, f"{local} bytes a thread, {lanes * local} bytes {block}", False),
        (".shared", shared, f"{shared} bytes a block", False),
        (".param", lanes * calls, f"{calls} bytes of call parameters a thread, {lanes * calls} bytes {block}", False),
    ]
    held = sum(size for _, size, _, once in needs if once)
    one = sum(size for _, size, _, once in needs if not once)
    if held + one > bound:
        space, _, asked, _ = max(needs, key=lambda need: need[1])
        raise refused(space, asked, bound)
    return max(1, min(wanted, (bound - held) // max(one, 1)))
