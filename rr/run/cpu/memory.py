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

`heap_kept` keeps glibc's heap whole while a launch runs, so that the statements' temporaries
reuse its pages instead of faulting fresh ones in.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
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


# glibc's malloc returns the top of its heap to the kernel once more than M_TRIM_THRESHOLD of it is
# free, and maps blocks above M_MMAP_THRESHOLD (both adjusted to the largest block freed, up to
# 32 MiB) one by one: the interpreter allocates and frees numpy temporaries of 0.1–6 MiB at every
# statement, which those rules hand back and fault in again, page by page (90 000 faults in an
# enc2 run, a twentieth of its time). With both thresholds fixed high the heap keeps its pages
# for the run; `malloc_trim` gives what is free back after it. Elsewhere than glibc: no change.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_HEAP_KEPT = 256 << 20


@functools.cache
def _glibc():
    """The process's glibc (its mallopt and malloc_trim), or None where the C library is another."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc's alone
        return libc
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def heap_kept():
    """Run the body with glibc's heap kept whole (no trimming, no mapped temporaries below
    256 MiB), and give its free memory back afterwards. The thresholds stay fixed for the rest
    of the process (glibc cannot be given back its adjusting ones), as later runs want them."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_TRIM_THRESHOLD, _HEAP_KEPT)
        libc.mallopt(_M_MMAP_THRESHOLD, _HEAP_KEPT)
    try:
        yield
    finally:
        if libc is not None:
            libc.malloc_trim(0)
