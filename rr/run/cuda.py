"""The CUDA backend: a launch description, or a frame's launches in turn (rr.run.frame), on the GPU
through cupy's driver API.

The module (cubin or PTX) is loaded with `moduleLoadData`, the parameter block is built from
`launch.json` and passed to `launchKernel` as an array of pointers to the parameter images, global
buffers are device copies, textures and surfaces are RGBA16F CUDA arrays with texture (point
sampling, clamp addressing) and surface objects. Every buffer the kernel may write (`out`,
`inout`) is copied back. Runs in the child process of a run (rr.run.child), so a fault cannot take
the caller down.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rr.run.frame import Frame, is_frame, load_frame_buffers, read_frame
from rr.records import Status
from rr.run.gpus import visible_gpus
from rr.run.launch import Launch, load_buffers, module_image, param_images, read_launch


class NoDevice(RuntimeError):
    """No usable CUDA device (no cupy, no driver, or no GPU)."""


def device_info() -> dict:
    """Name, compute capability, driver and runtime versions of device 0; NoDevice if none."""
    try:
        import cupy
        from cupy.cuda import runtime
    except ImportError as e:
        raise NoDevice(f"no CUDA device: cupy is not installed ({e}); pip install 'rr[gpu]'") from None
    try:
        count = runtime.getDeviceCount()
    except Exception as e:  # cupy raises CUDARuntimeError without a driver
        raise NoDevice(f"no CUDA device: {e}") from None
    if count == 0:
        raise NoDevice("no CUDA device: the driver reports 0 devices")
    props = runtime.getDeviceProperties(0)
    return {
        "name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "compute_capability": f"{props['major']}.{props['minor']}",
        "driver": runtime.driverGetVersion(),
        "runtime": runtime.runtimeGetVersion(),
        "cupy": cupy.__version__,
        "l2_bytes": props.get("l2CacheSize"),
        "uuid": next(iter(visible_gpus()), None),
    }


def _rgba16f_array(host, surface: bool):
    """A CUDA array holding an (h, w, 4) f16 image: from the host, or from a device copy of it."""
    from cupy.cuda import runtime, texture

    h, w, _ = host.shape
    desc = texture.ChannelFormatDescriptor(16, 16, 16, 16, runtime.cudaChannelFormatKindFloat)
    flags = runtime.cudaArraySurfaceLoadStore if surface else 0
    array = texture.CUDAarray(desc, w, h, flags=flags)
    array.copy_from((np.ascontiguousarray(host) if isinstance(host, np.ndarray) else host).reshape(h, w * 4))
    return array


DESCRIBED_KEPT = 64  # directories whose reading a Resident keeps (a sweep's reference ones and a few more)


def _most_recent(cache: dict, key, make) -> tuple:
    """(cache[key], whether it was made now): made by `make()` when absent, and either way moved to
    the end of the dict's order — the most recently used, so that trimming from the front drops
    the least recently used."""
    value = cache.pop(key, None)
    made = value is None
    if made:
        value = make()
    cache[key] = value
    return value, made


class Resident:
    """Buffer files read and put on the device once each, by the file's identity (device, inode,
    size, modification time: a relaunch hard-links its source's buffers, so the frame layout, every
    splice of it and the reference capture share most of theirs): what a run's or a timing's
    buffers are copied from on the device, instead of reading and uploading the same bytes again.

    A fresh child's lives for its one job. The GPU worker's (rr.run.worker) lives for all the jobs
    it serves, so a sweep's frame — its inputs and the unspliced run's outputs — stays on the device
    from one cell to the next: a 4K frame's 265 MiB were read and uploaded for every capture and
    every timing. `trim(budget)` (between jobs) keeps it within a budget, least recently used out.
    The arrays it hands out are read-only: jobs share them."""

    def __init__(self):
        self._host: dict = {}  # identity -> numpy array, in order of last use
        self._device: dict = {}  # identity -> cupy array of the same bytes
        self._kept: dict = {}  # a timing side's identity -> its Kept instances, in order of last use
        self._described: dict = {}  # a directory's identity -> its (frame, launch), as read and checked
        self.counts = {"read": 0, "uploaded": 0, "reused": 0}  # this job's, reset by trim()

    def described(self, directory: str | Path):
        """(frame or None, launch or None) of a launch or frame directory, read and checked as
        rr.run.frame.read_frame and rr.run.launch.read_launch check them the first time, and
        again only once a file in it changed (a 4K frame's frame.json took 9 ms, and a job read
        its directories several times)."""
        try:
            key = directory_identity(directory)
        except OSError:  # no such directory: the readers say so
            key = None
        def read():
            return (read_frame(directory), None) if is_frame(directory) else (None, read_launch(directory))

        if key is None:
            return read()
        found, _ = _most_recent(self._described, key, read)
        while len(self._described) > DESCRIBED_KEPT:
            self._described.pop(next(iter(self._described)))
        return found

    def kept(self, key) -> "Kept":
        """The prepared instances of a timing's side (rr.run.timing) kept from this worker's earlier
        timings of it, to take and to add to: a sweep times every splice against the one reference
        frame, and its instances — allocations, CUDA arrays, module loads — are made once."""
        return _most_recent(self._kept, key, Kept)[0]

    def host(self, path: Path, load) -> np.ndarray:
        """The buffer file's array, read by `load()` (which checks it) the first time."""
        try:
            key = file_identity(path)
        except OSError:  # no such file: load() says so as the launch's readers do
            return load()
        def read():
            a = np.ascontiguousarray(load())
            a.flags.writeable = False
            return a

        a, made = _most_recent(self._host, key, read)
        self.counts["read"] += made
        return a

    def device(self, path: Path):
        """The device copy of the buffer file `host` read."""
        import cupy

        key = file_identity(path)
        d, made = _most_recent(self._device, key, lambda: cupy.asarray(self._host[key]))
        self.counts["uploaded" if made else "reused"] += 1
        return d

    def sources(self, paths: dict[str, Path]) -> dict:
        """name -> the device copy of that buffer file (read by `host` first)."""
        return {name: self.device(path) for name, path in paths.items()}

    def trim(self, budget: int | None, instances_budget: int | None = None) -> dict:
        """Drop the least recently used files until the device copies fit in `budget` bytes, and
        the least recently used sides' kept instances until theirs fit in `instances_budget` (None:
        no bound); this job's counts (and the bytes kept), which start again from zero."""
        kept = sum(d.nbytes for d in self._device.values())
        while budget is not None and self._device and kept > budget:
            key = next(iter(self._device))
            kept -= self._device.pop(key).nbytes
            self._host.pop(key, None)
        instances = sum(k.nbytes for k in self._kept.values())
        while instances_budget is not None and self._kept and instances > instances_budget:
            instances -= self._kept.pop(next(iter(self._kept))).nbytes
        counts = {**self.counts, "resident_bytes": int(kept), "instances_bytes": int(instances)}
        self.counts = dict.fromkeys(self.counts, 0)
        return counts


@dataclass
class Kept:
    """One timing side's prepared instances kept in a worker, and the device bytes they take."""

    instances: list = field(default_factory=list)
    nbytes: int = 0


def file_identity(path: Path) -> tuple:
    """What makes two paths one unchanged file: not its ctime, which every new hard link moves."""
    st = Path(path).stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def directory_identity(directory: str | Path) -> tuple:
    """What makes a launch or frame directory the same as when it was last read: its path and
    every file in it, each by its identity."""
    return (str(Path(directory).resolve()),
            frozenset((e.name, file_identity(e.path)) for e in os.scandir(directory) if e.is_file()))


def read_resident(directory: str | Path, resident: Resident):
    """(frame or None, launch or None, host arrays, device sources) of a launch or frame
    directory, its buffers read through `resident` (and checked as the launch's readers check them)."""
    from rr.run.launch import load_buffer, load_buffers

    frame, launch = resident.described(directory)
    buffers = frame.buffers if frame else launch.buffers
    files = {name: Path(directory) / b.file for name, b in buffers.items()}
    if frame:  # as load_frame_buffers and load_buffers read (and check) them
        arrays = {name: resident.host(path, lambda p=path: load_buffer(p)) for name, path in files.items()}
    else:
        arrays = {name: resident.host(path, lambda n=name: load_buffers(directory, launch, {n})[n])
                  for name, path in files.items()}
    return frame, launch, arrays, resident.sources(files)


class DeviceBuffers:
    """Host arrays made resident on the device on first use, by name: a global buffer as device
    memory, an RGBA16F image as one CUDA array (made surface-capable, so a surface one launch
    writes is the texture the next one samples) with its texture and surface objects. A frame's
    launches share one of these, so what one layer writes the next reads where it is."""

    def __init__(self, arrays: dict[str, np.ndarray], sources: dict | None = None):
        self.arrays = arrays
        # name -> a device copy of the host array (Resident) to copy from on the device, not the host
        self.sources = sources or {}
        self.memory: dict = {}  # name -> cupy array, or CUDA array
        self._objects: dict = {}  # (name, kind) -> texture or surface object

    def handle(self, name: str, kind: str) -> int:
        """The 64-bit value a kernel parameter holds for the buffer: a device pointer, or a
        texture or surface object."""
        import cupy
        from cupy.cuda import runtime, texture

        host = self.sources.get(name)
        if host is None:
            host = self.arrays[name]
        if kind == "buffer":
            if name not in self.memory:
                if isinstance(host, np.ndarray):
                    self.memory[name] = cupy.asarray(np.ascontiguousarray(host).view(np.uint8).ravel())
                else:  # a copy on the device of the staged bytes
                    self.memory[name] = host.view(cupy.uint8).ravel().copy()
            return self.memory[name].data.ptr
        if name not in self.memory:
            self.memory[name] = _rgba16f_array(host, surface=True)
        if (name, kind) not in self._objects:
            res = texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=self.memory[name])
            if kind == "texture":
                tex = texture.TextureDescriptor(
                    (runtime.cudaAddressModeClamp,) * 2, runtime.cudaFilterModePoint,
                    runtime.cudaReadModeElementType, normalizedCoords=0)
                self._objects[name, kind] = texture.TextureObject(res, tex)
            else:
                self._objects[name, kind] = texture.SurfaceObject(res)
        return self._objects[name, kind].ptr

    def restore(self) -> None:
        """Every buffer made resident back to the bytes it was made from, on the device: a kept
        timing instance, launched again and again by earlier timings, starts the next one as a
        fresh instance would."""
        import cupy

        for name, d in self.memory.items():
            src = self.sources.get(name)
            if src is None:
                src = self.arrays[name]
            if isinstance(d, cupy.ndarray):
                if isinstance(src, np.ndarray):
                    d.set(np.ascontiguousarray(src).view(np.uint8).ravel())
                else:
                    d[...] = src.view(cupy.uint8).ravel()
            else:
                h, w, _ = self.arrays[name].shape
                d.copy_from((np.ascontiguousarray(src) if isinstance(src, np.ndarray) else src).reshape(h, w * 4))

    def same_as(self, name: str, source: Path, held: Path, resident: Resident) -> bool | None:
        """Whether buffer `name` (read from `source`) now holds what the .npy file `held` holds —
        shape, dtype and bytes — told without copying it back: on the device against `held`'s
        resident copy (an image copied out of its CUDA array there), or, never having been on the
        device, by being one file with it. None where the device cannot tell (a file that does not
        read): the host's comparison (rr.run.launch.holds_buffer) decides."""
        import cupy

        from rr.run.launch import LaunchError, load_buffer

        d = self.memory.get(name)
        try:
            if d is None:
                return True if file_identity(source) == file_identity(held) else None
            ref = resident.host(held, lambda: load_buffer(held))
        except (OSError, LaunchError):
            return None
        host = self.arrays[name]
        if ref.dtype != host.dtype or ref.shape != host.shape:
            return False
        if not isinstance(d, cupy.ndarray):  # an image: its CUDA array's texels, row after row
            h, w, _ = host.shape
            image = cupy.empty((h, w * 4), dtype=cupy.float16)
            d.copy_to(image)
            d = image
        return bool(cupy.array_equal(d.view(cupy.uint8).ravel(), resident.device(held).view(cupy.uint8).ravel()))

    def copy_back(self, name: str) -> np.ndarray:
        """The buffer as the device holds it now (as it was read, if it never went there)."""
        import cupy

        host = self.arrays[name]
        d = self.memory.get(name)
        if d is None:
            return host
        if isinstance(d, cupy.ndarray):
            return d.get().view(host.dtype).reshape(host.shape)
        h, w, _ = host.shape
        back = np.empty((h, w * 4), dtype=np.float16)
        d.copy_to(back)
        return back.reshape(h, w, 4)


class PreparedLaunch:
    """A launch made ready on the device: module loaded, buffers resident, parameters packed.
    `launch()` may be called many times (timing); `outputs()` copies back what was written.
    `device` shares the buffers of other launches (a frame's layers); `module` is its file."""

    def __init__(self, directory: str | Path, launch: Launch | None = None, device: DeviceBuffers | None = None,
                 module: Path | None = None):
        import cupy
        from cupy.cuda import driver

        self.directory = Path(directory)
        self.launch = launch or read_launch(directory)
        self.device = device or DeviceBuffers(load_buffers(directory, self.launch))
        self.arrays = self.device.arrays
        cupy.empty(1)  # make the context current before any driver call
        # a cubin, fatbin or PTX told apart by its bytes, whatever the file is called
        self.module = driver.moduleLoadData(module_image(module or self.directory / self.launch.module))
        self.function = driver.moduleGetFunction(self.module, self.launch.entry)
        handles = {f.buffer: self.device.handle(f.buffer, f.kind)
                   for f in self.launch.fields + self.launch.extra if f.kind != "scalar"}
        # Keep the parameter images and the pointer array alive as long as the launch object.
        self._images = [np.frombuffer(b, dtype=np.uint8).copy() for b in param_images(self.launch, handles)]
        self._pointers = np.array([img.ctypes.data for img in self._images], dtype=np.uint64)

    def __del__(self):
        # a long-lived worker (rr.run.worker) loads modules job after job: each goes with its launch
        module = getattr(self, "module", None)
        if module is not None:
            try:
                from cupy.cuda import driver

                driver.moduleUnload(module)
            except Exception:  # a context already gone (interpreter exit, a fault): nothing to free
                pass

    def launch_async(self, stream: int = 0) -> None:
        from cupy.cuda import driver

        g, b = self.launch.grid, self.launch.block
        driver.launchKernel(self.function, g[0], g[1], g[2], b[0], b[1], b[2],
                            self.launch.shared_bytes, stream, self._pointers.ctypes.data, 0)

    def outputs(self, skip=()) -> dict[str, np.ndarray]:
        """Every buffer after the run but those in `skip`: written ones copied back, the others as
        they were read."""
        out = {name: a for name, a in self.arrays.items() if name not in skip}
        for name, b in self.launch.buffers.items():
            if b.role != "in" and name not in skip:
                out[name] = self.device.copy_back(name)
        return out


def equal_on_device(device: DeviceBuffers, directory: str | Path, files: dict[str, str],
                    reference: str | Path | None, resident: Resident) -> set[str]:
    """The buffers (name -> file) that the device shows equal to the reference capture's file of
    the same name: these are not copied back, and the run's output links the reference's files."""
    if reference is None:
        return set()
    return {name for name, file in files.items()
            if device.same_as(name, Path(directory) / file, Path(reference) / file, resident)}


def run_cuda(directory: str | Path, resident: Resident | None = None,
             reference: str | Path | None = None) -> tuple[dict, dict[str, np.ndarray], set[str]]:
    """Launch once and synchronise; (run record, buffers after the run, the names of those equal
    to `reference`'s files — not in the buffers, never copied back)."""
    info = device_info()
    from cupy.cuda import runtime

    resident = resident or Resident()
    t0 = time.perf_counter()
    _, launch, arrays, sources = read_resident(directory, resident)
    prepared = PreparedLaunch(directory, launch, DeviceBuffers(dict(arrays), sources))
    t1 = time.perf_counter()
    prepared.launch_async()
    runtime.deviceSynchronize()  # a fault surfaces here as CUDARuntimeError
    t2 = time.perf_counter()
    equal = equal_on_device(prepared.device, directory, {n: b.file for n, b in launch.buffers.items()},
                            reference, resident)
    outputs = prepared.outputs(skip=equal)
    record = {"status": Status.OK, "message": "", "backend": "cuda", "device": info, "resident": dict(resident.counts),
              "times_ms": {"prepare": (t1 - t0) * 1e3, "launch_and_sync": (t2 - t1) * 1e3,
                           "copy_back": (time.perf_counter() - t2) * 1e3}}
    return record, outputs, equal


class PreparedFrame:
    """Every layer of a frame made ready on the device over one set of resident buffers;
    `launch_async` runs the whole frame (timing), `outputs` copies every buffer back."""

    def __init__(self, directory: str | Path, frame: Frame | None = None, arrays: dict | None = None,
                 device=None):
        self.directory = Path(directory)
        self.frame = frame or read_frame(directory)
        self.device = device or DeviceBuffers(arrays if arrays is not None else load_frame_buffers(directory, self.frame))
        self.layers = [PreparedLaunch(directory, lyr.launch, self.device) for lyr in self.frame.layers]

    def launch_async(self, stream: int = 0) -> None:
        for p in self.layers:
            p.launch_async(stream)

    def outputs(self, skip=()) -> dict[str, np.ndarray]:
        return {name: self.device.copy_back(name) for name in self.frame.buffers if name not in skip}


def run_frame_cuda(directory: str | Path, resident=None,
                   reference: str | Path | None = None) -> tuple[dict, dict[str, np.ndarray], set[str]]:
    """The frame on the GPU: each layer launched and synchronised in turn (a fault names its
    layer), the buffers on the device throughout, copied back at the end but for those equal to
    `reference`'s files (the third of what it returns, as run_cuda's)."""
    from cupy.cuda import runtime

    info = device_info()
    resident = resident or Resident()
    t0 = time.perf_counter()
    frame, _, arrays, sources = read_resident(directory, resident)
    prepared = PreparedFrame(directory, frame, device=DeviceBuffers(dict(arrays), sources))
    t1 = time.perf_counter()
    layers = []
    first = prepared.frame.first()
    for lyr, p in list(zip(prepared.frame.layers, prepared.layers))[first:]:
        start = time.perf_counter()
        try:
            p.launch_async()
            runtime.deviceSynchronize()
        except Exception as e:
            raise RuntimeError(f"layer {lyr.layer}: {type(e).__name__}: {e}") from e
        layers.append({"layer": lyr.layer, "times_ms": {"launch_and_sync": (time.perf_counter() - start) * 1e3}})
    t2 = time.perf_counter()
    equal = equal_on_device(prepared.device, directory, {n: b.file for n, b in frame.buffers.items()},
                            reference, resident)
    outputs = prepared.outputs(skip=equal)
    return {"status": Status.OK, "message": "", "backend": "cuda", "frame": list(prepared.frame.frame),
            "start": prepared.frame.start, "device": info, "resident": dict(resident.counts),
            "layers": layers, "times_ms": {"prepare": (t1 - t0) * 1e3, "frame": (t2 - t1) * 1e3,
                                           "copy_back": (time.perf_counter() - t2) * 1e3}}, outputs, equal
