"""The CUDA backend: one launch of a launch description on the GPU through cupy's driver API.

The module (cubin or PTX) is loaded with `moduleLoadData`, the parameter block is built from
`launch.json` and passed to `launchKernel` as an array of pointers to the parameter images, global
buffers are device copies, textures and surfaces are RGBA16F CUDA arrays with texture (point
sampling, clamp addressing) and surface objects. Every buffer the kernel may write (`out`,
`inout`) is copied back. Runs in the child process of `rr.run.isolate`, so a fault cannot take the
caller down.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from rr.run.gpus import visible_gpus
from rr.run.launch import Launch, load_buffers, param_images, read_launch


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


def _rgba16f_array(host: np.ndarray, surface: bool):
    from cupy.cuda import runtime, texture

    h, w, _ = host.shape
    desc = texture.ChannelFormatDescriptor(16, 16, 16, 16, runtime.cudaChannelFormatKindFloat)
    flags = runtime.cudaArraySurfaceLoadStore if surface else 0
    array = texture.CUDAarray(desc, w, h, flags=flags)
    array.copy_from(np.ascontiguousarray(host).reshape(h, w * 4))
    return array


class PreparedLaunch:
    """A launch made ready on the device: module loaded, buffers resident, parameters packed.
    `launch()` may be called many times (timing); `outputs()` copies back what was written."""

    def __init__(self, directory: str | Path, launch: Launch | None = None):
        import cupy
        from cupy.cuda import driver, runtime, texture

        self.directory = Path(directory)
        self.launch = launch or read_launch(directory)
        self.arrays = load_buffers(directory, self.launch)
        cupy.empty(1)  # make the context current before any driver call
        image = (self.directory / self.launch.module).read_bytes()
        if self.launch.module.endswith(".ptx"):
            image += b"\0"
        self.module = driver.moduleLoadData(image)
        self.function = driver.moduleGetFunction(self.module, self.launch.entry)
        kinds = {f.buffer: f.kind for f in self.launch.fields + self.launch.extra if f.kind != "scalar"}
        self.device: dict = {}
        handles: dict[str, int] = {}
        for name, kind in kinds.items():
            host = self.arrays[name]
            if kind == "buffer":
                d = cupy.asarray(np.ascontiguousarray(host).view(np.uint8).ravel())
                self.device[name] = d
                handles[name] = d.data.ptr
            else:
                array = _rgba16f_array(host, surface=kind == "surface")
                res = texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=array)
                if kind == "texture":
                    tex = texture.TextureDescriptor(
                        (runtime.cudaAddressModeClamp,) * 2, runtime.cudaFilterModePoint,
                        runtime.cudaReadModeElementType, normalizedCoords=0)
                    obj = texture.TextureObject(res, tex)
                else:
                    obj = texture.SurfaceObject(res)
                self.device[name] = (array, obj)
                handles[name] = obj.ptr
        # Keep the parameter images and the pointer array alive as long as the launch object.
        self._images = [np.frombuffer(b, dtype=np.uint8).copy() for b in param_images(self.launch, handles)]
        self._pointers = np.array([img.ctypes.data for img in self._images], dtype=np.uint64)

    def launch_async(self, stream: int = 0) -> None:
        from cupy.cuda import driver

        g, b = self.launch.grid, self.launch.block
        driver.launchKernel(self.function, g[0], g[1], g[2], b[0], b[1], b[2],
                            self.launch.shared_bytes, stream, self._pointers.ctypes.data, 0)

    def outputs(self) -> dict[str, np.ndarray]:
        """Every buffer after the run: written ones copied back, the others as they were read."""
        out = dict(self.arrays)
        for name, b in self.launch.buffers.items():
            if b.role == "in" or name not in self.device:
                continue
            host = self.arrays[name]
            d = self.device[name]
            if isinstance(d, tuple):
                h, w, _ = host.shape
                back = np.empty((h, w * 4), dtype=np.float16)
                d[0].copy_to(back)
                out[name] = back.reshape(h, w, 4)
            else:
                out[name] = d.get().view(host.dtype).reshape(host.shape)
        return out


def run_cuda(directory: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Launch once and synchronise; (run record, buffers after the run)."""
    info = device_info()
    from cupy.cuda import runtime

    t0 = time.perf_counter()
    prepared = PreparedLaunch(directory)
    t1 = time.perf_counter()
    prepared.launch_async()
    runtime.deviceSynchronize()  # a fault surfaces here as CUDARuntimeError
    t2 = time.perf_counter()
    outputs = prepared.outputs()
    record = {"status": "ok", "message": "", "backend": "cuda", "device": info,
              "times_ms": {"prepare": (t1 - t0) * 1e3, "launch_and_sync": (t2 - t1) * 1e3,
                           "copy_back": (time.perf_counter() - t2) * 1e3}}
    return record, outputs
