"""`rr capture`: run a command under the interposer and put what it wrote together as a capture.

DIR (written whole, like every directory output of rr: it appears only when complete):

    capture.json                 the launches in order, the modules, the processes, the command
    modules/<fnv1a64>.<ext>      every module the program loaded, once (ptx, cubin or fatbin)
    launches/NNNNNN/             one launch directory per captured launch (`rr run` accepts it):
        launch.json, <module>, <buffer>.npy   the buffers as they were before the launch
        params.bin                            the raw parameter bytes
        after/                                the same launch with the buffers after it (`rr compare`)

A launch that cannot be replayed faithfully keeps its copies and has `launch.error.json`
(`unsupported`, the reason) instead of launch.json. The program's exit status is the command's;
a program that dies mid-capture leaves every launch completed before it (the interposer renames a
launch's directory into place only when it is whole).

With replacements (`rr capture --inject ENTRY=FILE`, rr.capture.inject) the program runs with
them in place: capture.json says, per launch, whether it ran the replacement (`replaced`), and
(`inject`) the replacements and every decision the interposer made about them; a replacement that
was not in place everywhere the program ran its entry is the capture's `injection` problem.

A write that fails (a full disk) stops the capture at that launch: the interposer removes what it
had written of it and captures no more (the program runs on); here a launch directory that cannot
be put together is removed and the ones after it are dropped, and when capture.json itself does
not fit the last launches are dropped until it does. Every launch directory in DIR is whole, the
launches in it are the first ones in order, and `error` says which launch failed and why.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from rr import children
from rr.capture.build import CaptureError, interposer
from rr.capture.convert import describe
from rr.capture.index import CAPTURE_FILE
from rr.capture.inject import Outcome, environment, injection, read_processes
from rr.records import LAUNCH_ERROR, Status, failure, record_text


@dataclass
class CaptureResult:
    exit_status: int  # the program's; 128 + N when signal N ended it
    output: Path | None  # DIR, or None when nothing was captured (nothing is written then)
    launches: list = field(default_factory=list)  # capture.json's launch entries
    notes: list = field(default_factory=list)  # what rr tells the user (stderr)
    error: str | None = None  # capturing failed (a write: a full disk): the launches before it are kept
    injection: Outcome | None = None  # with replacements: what became of them


def parse_range(text: str) -> list[tuple[int, int | None]]:
    """`--launches`: comma-separated `N`, `A:B` (A to B-1), `A:` or `:B`, 0-based, in the order of
    the launches that match --kernels. CaptureError when it is not one."""
    ranges = []
    for part in text.split(","):
        part = part.strip()
        a, colon, b = part.partition(":")
        try:
            start = int(a) if a else 0
            end = (int(b) if b else None) if colon else start + 1
        except ValueError:
            start, end = -1, None
        if start < 0 or (end is not None and end <= start) or not part:
            raise CaptureError(f"--launches {text!r}: {part!r} is not N, A:B (A < B), A: or :B (0 is the first "
                               "matching launch)")
        ranges.append((start, end))
    return ranges


def check_pattern(pattern: str) -> None:
    """--kernels must compile as the interposer compiles it: POSIX extended (libc's regcomp)."""
    import ctypes

    libc = ctypes.CDLL(None)
    regex = ctypes.create_string_buffer(1024)  # larger than any libc's regex_t
    try:
        failed = libc.regcomp(regex, pattern.encode(), 1 | 8)  # REG_EXTENDED | REG_NOSUB
    except UnicodeEncodeError:
        failed = 1
    if failed:
        raise CaptureError(f"--kernels {pattern!r}: not a POSIX extended regular expression (as grep -E takes)")
    libc.regfree(regex)


class _Nothing(Exception):
    """Nothing was captured: the output directory is not written."""


def run_capture(command: list[str], output: str | Path, kernels: str | None = None, launches: str | None = None,
                cache: str | Path | None = None, inject: list = ()) -> CaptureResult:
    """Run `command` under the interposer, with the rr.capture.replacement.Replacements `inject`
    in place, and write the capture to `output`."""
    from rr.io import atomic_dir

    if not command:
        raise CaptureError("rr capture: no command given (rr capture -o DIR -- COMMAND [ARGS…])")
    if kernels is not None:
        check_pattern(kernels)
    ranges = parse_range(launches) if launches is not None else []
    result = CaptureResult(0, None)
    try:
        with (interposer(cache) as library, atomic_dir(output) as tmp,
              injection(inject) if inject else contextlib.nullcontext() as injected):
            raw = tmp / "raw"
            env = environment(library, injected, dict(os.environ, RR_CAPTURE_DIR=str(raw)))
            env.pop("RR_CAPTURE_KERNELS", None)
            env.pop("RR_CAPTURE_LAUNCHES", None)
            if kernels is not None:
                env["RR_CAPTURE_KERNELS"] = kernels
            if ranges:
                env["RR_CAPTURE_LAUNCHES"] = ",".join(f"{a}-{'' if b is None else b}" for a, b in ranges)
            t0 = time.time()
            try:
                # the program's own stdin, stdout and stderr, and the terminal (it stays in rr's
                # process group); it dies with rr (rr.children)
                status = children.run(command, env=env, stdin=None, group=False).returncode
            except OSError as e:
                raise CaptureError(f"{command[0]}: cannot run it ({e.strerror})") from None
            result.exit_status = 128 - status if status < 0 else status
            if status < 0:
                result.notes.append(f"{command[0]} was killed by {signal.Signals(-status).name}")
            if injected is not None:
                result.injection = Outcome(result.exit_status, read_processes(injected), tuple(inject))
            _assemble(raw, tmp, command, kernels, launches, result, time.time() - t0, Path(output))
            if not result.launches:
                raise _Nothing()
    except _Nothing:
        return result
    result.output = Path(output)
    return result


def cuda_driver(environ) -> str | None:
    """Where the program would find the CUDA driver (libcuda.so.1): a directory of its
    LD_LIBRARY_PATH, or the dynamic linker's cache; None where there is none — a CUDA program that
    made no driver call may simply have found no driver to call."""
    import ctypes.util

    for directory in environ.get("LD_LIBRARY_PATH", "").split(":"):
        if directory and (Path(directory) / "libcuda.so.1").exists():
            return str(Path(directory) / "libcuda.so.1")
    return ctypes.util.find_library("cuda")


def _processes(raw: Path) -> list[Path]:
    """The capturing processes' directories, in the order they first launched."""
    found = [d for d in raw.iterdir() if d.is_dir() and d.name.isdigit()] if raw.is_dir() else []

    def first(d: Path) -> float:
        stamps = [p.stat().st_mtime for p in d.iterdir() if p.name.isdigit()]
        return min(stamps, default=(d / "names.txt").stat().st_mtime if (d / "names.txt").exists() else 0.0)
    return sorted(found, key=lambda d: (first(d), int(d.name)))


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.is_file() else []


def _stop_record(proc: Path) -> dict | None:
    """Why the interposer stopped capturing in a process (its status.txt), or None."""
    line = (_lines(proc / "status.txt") or ["capturing"])[0]
    if line.strip() == "capturing":
        return None
    seq, entry, error, detail = (line.split("\t", 3) + ["", "", ""])[:4]
    return {"seq": int(seq) if seq.isdigit() else None, "entry": entry, "error": error, "detail": detail}


def _stopped_at(index: int, what: str, output: Path) -> str:
    """The error of a capture that stopped at launch `index` (`what` happened to it)."""
    kept = (f"{output} keeps the {index} launch{'es' if index != 1 else ''} before it, each whole" if index
            else f"no launch is kept: {output} is not written")
    return f"launch {index} {what}; the capture stopped there, {kept}"


def _assemble(raw: Path, tmp: Path, command, kernels, launches, result: CaptureResult, seconds: float,
              output: Path) -> None:
    """Move what the interposer wrote into launch directories and write capture.json; the notes
    say what was not captured and why, `result.error` where a write failed (a full disk)."""
    processes = _processes(raw)
    modules = tmp / "modules"
    if (raw / "modules").is_dir():
        os.rename(raw / "modules", modules)
    seen, index, entries = {}, 0, []
    process_rows = []
    for proc in processes:
        counts = {}
        for line in _lines(proc / "counts.txt"):
            n, _, name = line.partition(" ")
            counts[name] = int(n)
        names = _lines(proc / "names.txt")
        stopped = _stop_record(proc)
        for name in names:
            seen[name] = seen.get(name, 0) + counts.get(name, 0)
        process_rows.append({"pid": int(proc.name), "entries": {n: counts.get(n) for n in names},
                             "stopped": stopped and stopped["detail"]})
        for launch_dir in sorted((d for d in proc.iterdir() if d.name.isdigit()), key=lambda d: int(d.name)):
            if result.error:  # the disk filled while assembling: no launch after the one that failed
                break
            dest = tmp / "launches" / f"{index:06d}"
            try:
                entries.append(_launch(launch_dir, dest, modules, index, int(proc.name), result.injection is not None))
            except OSError as e:
                shutil.rmtree(dest, ignore_errors=True)  # whole or absent
                entry = json.loads((launch_dir / "record.json").read_text()).get("entry", "?")
                result.error = _stopped_at(index, f"({entry}, process {proc.name}'s launch {int(launch_dir.name)}) "
                                           f"could not be written ({e.strerror or e})", output)
                break
            index += 1
        if stopped and not result.error:
            what = (f"({stopped['entry']}, process {proc.name}'s launch {stopped['seq']}) could not be written"
                    if stopped["entry"] else f"could not be captured: a module of process {proc.name} could not be "
                    "written")
            result.error = _stopped_at(index, f"{what} ({stopped['error']})", output)
        shutil.rmtree(proc, ignore_errors=True)  # what is left of it is not part of DIR: room for what is
    result.launches = entries
    if not processes:
        driver = cuda_driver(os.environ)
        why = ("not a CUDA program?" if driver else "no CUDA driver on this machine: libcuda.so.1 is neither on "
               "LD_LIBRARY_PATH nor in the linker's cache, so a CUDA program cannot run here; capture where the NVIDIA "
               "driver is installed")
        result.notes.append(f"{command[0]} made no CUDA driver call that rr hooks ({why}): nothing captured")
        return
    if not entries:
        launched = ", ".join(f"{n} ({c})" if c else n for n, c in seen.items())
        if result.error:
            pass  # nothing was written whole: the error says why
        elif not seen:
            result.notes.append(f"{command[0]} launched no kernel: nothing captured")
        elif kernels is not None and launches is None:
            result.notes.append(f"no launch matched --kernels {kernels!r}: nothing captured; the program launched "
                                f"{launched}")
        else:
            result.notes.append(f"no launch matched --kernels {kernels!r} --launches {launches!r}: nothing captured; "
                                f"the program launched {launched}")
        return
    for e in entries:
        for w in e["warnings"]:
            result.notes.append(f"launch {e['index']} ({e['entry']}): {w}")
        if e["status"] != Status.OK:
            result.notes.append(f"launch {e['index']} ({e['entry']}): not replayable: {e['message']}")
    injected = result.injection
    _write_index(tmp, entries, result, output, lambda kept: {
        "command": list(command), "exit_status": result.exit_status, "kernels": kernels, "launches_selected": launches,
        "seconds": round(seconds, 3), "stopped": result.error,
        "modules": sorted(p.name for p in modules.iterdir()) if modules.is_dir() else [],
        "processes": process_rows, "launches": kept,
        **({"inject": {"modules": [r.record() for r in injected.found], **injected.record(),
                       "problems": injected.problems()}} if injected else {}),
    })
    shutil.rmtree(raw, ignore_errors=True)


def _write_index(tmp: Path, entries: list, result: CaptureResult, output: Path, index_of) -> None:
    """capture.json of `entries`; on a full disk the last launches are dropped (their directories
    freed) until it fits. Also reserves the block of the marker that rr.io.atomic_dir writes last,
    which would otherwise find no room and take the whole capture with it."""
    from rr.io import MARKER, json_text

    while True:
        try:
            (tmp / MARKER).write_text("reserved by rr capture\n")  # rewritten in place by atomic_dir
            (tmp / CAPTURE_FILE).write_text(json_text(index_of(entries)))
            return
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT) or not entries:
                raise
            dropped = entries.pop()
            shutil.rmtree(tmp / dropped["dir"], ignore_errors=True)
            result.error = _stopped_at(len(entries), f"({dropped['entry']}) was dropped to make room for "
                                       f"{CAPTURE_FILE} ({e.strerror})", output)
            result.launches = entries
            if not entries:  # nothing is kept: DIR is not written
                return


def _launch(src: Path, dest: Path, modules: Path, index: int, pid: int, injecting: bool) -> dict:
    """One raw launch directory as a launch directory (and its after/ run); its capture.json entry
    (with `injecting`, whether the launch ran a replacement)."""
    from rr.run.launch import link_or_copy

    record = json.loads((src / "record.json").read_text())
    params = (src / "params.bin").read_bytes()
    d = describe(record, params)
    dest.mkdir(parents=True)
    os.rename(src / "params.bin", dest / "params.bin")
    (src / "record.json").unlink()  # its room is launch.json's, on a full disk too
    if d.launch is None:
        for side in ("before", "after"):
            (dest / side).mkdir()
            for raw_file, name in d.files.items():
                os.rename(src / side / raw_file, dest / side / name)
        LAUNCH_ERROR.within(dest).write_text(record_text(failure(d.status, d.message)))
    else:
        (dest / "after").mkdir()
        for directory, side in ((dest, "before"), (dest / "after", "after")):
            for raw_file, name in d.files.items():
                os.rename(src / side / raw_file, directory / name)
            link_or_copy(modules / d.launch.module, directory / d.launch.module)
        (dest / "launch.json").write_text(json.dumps(d.launch.to_json(), indent=2) + "\n")
        link_or_copy(dest / "launch.json", dest / "after" / "launch.json")  # the same launch
    return {
        "index": index, "dir": f"launches/{dest.name}", "status": d.status, "message": d.message,
        "warnings": list(d.warnings), "entry": record["entry"], "module": record["module"], "api": record["api"],
        "process": pid, "process_launch": record["seq"], "match": record["match"],
        "grid": record["grid"], "block": record["block"], "shared_bytes": record["shared_bytes"],
        "stream": record["stream"], "params_source": record["params_source"], "params_size": record["params_size"],
        "params": record["params"], "layout": d.launch.layout if d.launch else None, "buffers": list(d.buffers),
        "bytes_copied": record["bytes_copied"], "bytes_written": record["bytes_written"], "times_ns": record["times_ns"],
        **({"replaced": record["replaced"]} if injecting else {}),
    }
