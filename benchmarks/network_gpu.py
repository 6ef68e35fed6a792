"""On a GPU: the synthetic network's whole frame — every layer against its model, every layer ×
phase spliced by regen and isolate and run as a whole frame (is the final frame byte-identical?),
the frame's and each layer's time, and the isolated phase-8 splice of enc2 timed as a frame.

    python benchmarks/network_gpu.py prepare --frame 3840x2160 --work DIR [--jobs 16] [--layers …]
    python benchmarks/network_gpu.py reference --work DIR     # GPU: the reference frame, layer times
    python benchmarks/network_gpu.py models --work DIR        # CPU: each layer against its model
    python benchmarks/network_gpu.py cells --work DIR         # GPU: every spliced cell as a frame
    python benchmarks/network_gpu.py timing --work DIR        # GPU: rr time, frame and layer
    python benchmarks/network_gpu.py cost --work DIR          # GPU: where a timing's time goes (after timing)

`prepare` (CPU only) makes the engine, the corpus, the frame layout, every layer's reference cubin
and a frame directory launching them (`ref.frame`), then splices and compiles every cell with ptxas
in parallel (`cells.json`: status, registers, spills per cell). `cells` runs each cell in this one
process — no start-up per cell: the frame's buffers stay on the device, and for a cell of layer L
the buffers L and the layers after it write are reset to the frame's inputs, L's module is the
splice's cubin, and layers L … dec0 run (the layers before L hold the reference frame's bytes:
the frame runs once first, and again from L after a cell that differed); every buffer they wrote
is compared with the reference frame's bytes. The working tree must not change while `prepare`
runs: each cell's `rr splice` and `rr compile` read rr's code afresh. (The workflow's cells do the same through `rr relaunch --resume` and `rr run`, one
process each.) `reference` compares each layer's outputs with the numpy model run on the GPU's own
inputs to that layer (so a layer is not charged with its predecessors' differences), with the
sm_90 `mma` model and the exact-sum one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import rr  # noqa: E402

from rr.run.compare import compare_buffer  # noqa: E402
from rr.run.cuda import PreparedFrame  # noqa: E402
from rr.synth.family import LAYERS  # noqa: E402

PATTERN = "cuda_dldn_engine_swin_{layer}_kernel"
RECIPES = Path(__file__).resolve().parents[1] / "config" / "recipes"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- prepare (CPU) ---------------------------------------------------------------------------------

def compile_cell(work: Path, layer: str, phase: int, template: str) -> dict:
    tag = work / "cells" / f"{layer}_{template}_{phase}"
    entry = PATTERN.format(layer=layer)
    rec = {"layer": layer, "phase": phase, "template": template}
    r = rr("splice", work / "corpus", "--entry", entry, "--recipe", RECIPES / f"{template}.yaml", "--phase", phase,
           "-o", f"{tag}.ptx", check=False)
    if r.returncode:
        return {**rec, "status": "splice_error", "message": r.stderr.strip()[-400:]}
    r = rr("compile", f"{tag}.ptx", "-o", f"{tag}.cubin", check=False)
    if r.returncode:
        return {**rec, "status": "compile_error", "message": r.stderr.strip()[-400:]}
    fn = next(iter(json.loads(Path(f"{tag}.cubin.json").read_text())["functions"].values()))
    Path(f"{tag}.ptx").unlink()
    return {**rec, "status": "compiled", "cubin": f"{tag}.cubin", "registers": fn["registers"],
            "spill_stores": fn["spill_stores"], "warnings": r.stderr.strip()[-400:]}


def prepare(args) -> None:
    from rr.run.frame import replace_layer

    work = Path(args.work)
    (work / "cells").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rr("synth", "engine", "-o", work / "engine.bin")
    rr("extract", work / "engine.bin", "-o", work / "corpus")
    rr("launch", "frame", work / "corpus", "--frame", args.frame, "-o", work / "layout")
    layers = args.layers or [s.name for s in LAYERS]
    log(f"layout made ({time.perf_counter() - t0:.0f} s); compiling the {len(LAYERS)} reference modules")

    def ref(layer):
        entry = PATTERN.format(layer=layer)
        rr("compile", work / "corpus", "--entry", entry, "-o", work / f"ref_{layer}.cubin")
        spec = json.loads(rr("spec", work / "corpus", "--entry", entry, "--json").stdout)
        fn = next(iter(json.loads((work / f"ref_{layer}.cubin.json").read_text())["functions"].values()))
        return layer, [p["phase"] for p in spec["phases"]], fn

    with ThreadPoolExecutor(args.jobs) as pool:
        refs = list(pool.map(ref, [s.name for s in LAYERS]))
    phases = {layer: ph for layer, ph, _ in refs}
    (work / "reference.json").write_text(json.dumps({layer: {"phases": ph, "registers": fn["registers"],
                                                             "spill_stores": fn["spill_stores"]}
                                                     for layer, ph, fn in refs}, indent=1))
    src = work / "layout"
    for i, (layer, _, _) in enumerate(refs):  # the frame with every layer launched as its ptxas cubin
        dst = work / ("ref.frame" if i == len(refs) - 1 else f"ref.frame.{i}")
        replace_layer(src, layer, work / f"ref_{layer}.cubin", dst)
        if src != work / "layout":
            import shutil
            shutil.rmtree(src)
        src = dst
    (work / "reference.ready").write_text("")
    log(f"reference frame ready ({time.perf_counter() - t0:.0f} s)")
    cells = [(layer, p, t) for layer in layers for p in phases[layer] for t in args.templates
             if not args.phases or p in args.phases]
    done = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for i, rec in enumerate(pool.map(lambda c: compile_cell(work, *c), cells), 1):
            done.append(rec)
            if i % 50 == 0 or i == len(cells):
                log(f"compiled {i}/{len(cells)} cells ({time.perf_counter() - t0:.0f} s)")
    (work / "cells.json").write_text(json.dumps(done, indent=1))
    log(f"prepare done: {len(done)} cells, {sum(r['status'] == 'compiled' for r in done)} compiled, "
        f"{time.perf_counter() - t0:.0f} s")


# -- the frame in one process ----------------------------------------------------------------------

class ResidentFrame:
    """The reference frame on the device (rr's PreparedFrame), run once, and cells run over it
    (module docstring)."""

    def __init__(self, directory: Path):
        prepared = PreparedFrame(directory)
        self.directory, self.frame, self.device = prepared.directory, prepared.frame, prepared.device
        self.initial = self.device.arrays  # the host arrays as read: device runs never write them
        self.order = [lyr.layer for lyr in self.frame.layers]
        self.launches = dict(zip(self.order, prepared.layers))
        self.writes = {lyr.layer: [n for n, b in lyr.launch.buffers.items() if b.role != "in"]
                       for lyr in self.frame.layers}
        self.run(self.order[0])  # the reference frame: what a cell's layers before L read

    def restore(self, start: str) -> None:
        """The reference frame's state again from `start` on (after a cell that differed)."""
        self.reset(self.written_from(start))
        self.run(start)

    def reset(self, names) -> None:
        import cupy

        for name in names:
            if name not in self.device.memory:  # never bound to a launch: nothing on the device
                continue
            d, host = self.device.memory[name], self.initial[name]
            if isinstance(d, cupy.ndarray):
                d.set(np.ascontiguousarray(host).view(np.uint8).ravel())
            else:
                h, w, _ = host.shape
                d.copy_from(np.ascontiguousarray(host).reshape(h, w * 4))

    def run(self, start: str, replaced=None) -> None:
        from cupy.cuda import runtime

        for layer in self.order[self.order.index(start):]:
            p = replaced if (replaced is not None and layer == start) else self.launches[layer]
            p.launch_async()
        runtime.deviceSynchronize()

    def written_from(self, start: str) -> list:
        return [n for layer in self.order[self.order.index(start):] for n in self.writes[layer]]


def same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    return np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(y).view(np.uint8))


def agreement(name: str, model: np.ndarray, gpu: np.ndarray, element: str | None) -> dict:
    """How a layer's model output agrees with the GPU's: the share of its elements alike bit for
    bit, and the PSNR as rr compares runs (rr.run.compare) where its bytes are numbers (`element`)."""
    c = compare_buffer(name, model, gpu, element)
    return {"identical": 1 - c.differing_elements / max(c.elements, 1),
            "psnr_db": None if element is None else c.psnr_db}


def _model_layer(args):
    """One layer's model on the GPU's inputs to it: {buffer: (share identical, PSNR)}."""
    work, layer, mma_name = args
    from rr.numerics.mma import MMA_MODELS
    from rr.synth.network import network_layout, network_model

    ref = dict(np.load(work / "ref_after.npz"))
    meta = json.loads((work / "ref_meta.json").read_text())
    layout = network_layout(tuple(meta["frame"]))
    t0 = time.perf_counter()
    model = network_model(ref, layout, MMA_MODELS[mma_name], layers={layer})
    lyr = next(x for x in layout.layers if x.layer == layer)
    out = {}
    for name in lyr.writes:
        out[name] = agreement(name, model[name], ref[name], layout.buffers[name].element)
    return layer, mma_name, out, time.perf_counter() - t0


def reference(args) -> None:
    import cupy

    work = Path(args.work)
    while not (work / "reference.ready").exists():
        time.sleep(2)
    t0 = time.perf_counter()
    rf = ResidentFrame(work / "ref.frame")  # runs the frame once
    after = {n: rf.device.copy_back(n) for n in rf.frame.buffers}
    log(f"reference frame run ({time.perf_counter() - t0:.1f} s with loading)")
    np.savez(work / "ref_after.npz", **after)
    (work / "ref_meta.json").write_text(json.dumps({"frame": list(rf.frame.frame)}))
    # the frame again, twice more: deterministic?
    rf.restore(rf.order[0])
    repeat_same = all(same_bytes(rf.device.copy_back(n), after[n]) for n in rf.frame.buffers)
    # times: CUDA events around each layer, 50 frames (no L2 flush between layers: the frame as it runs)
    ev = [cupy.cuda.Event() for _ in range(len(rf.order) + 1)]
    per_layer = {layer: [] for layer in rf.order}
    frame_ms = []
    for _ in range(args.repeats):
        ev[0].record()
        for i, layer in enumerate(rf.order):
            rf.launches[layer].launch_async()
            ev[i + 1].record()
        ev[-1].synchronize()
        for i, layer in enumerate(rf.order):
            per_layer[layer].append(cupy.cuda.get_elapsed_time(ev[i], ev[i + 1]))
        frame_ms.append(cupy.cuda.get_elapsed_time(ev[0], ev[-1]))
    times = {"frame_ms_median": statistics.median(frame_ms), "frame_ms_min": min(frame_ms),
             "layer_ms_median": {k: statistics.median(v) for k, v in per_layer.items()}}
    log(f"frame {times['frame_ms_median']:.3f} ms median of {args.repeats}; repeat identical: {repeat_same}")
    for layer in rf.order:
        log(f"  {layer:<5} {times['layer_ms_median'][layer]:.4f} ms")
    (work / "reference_results.json").write_text(json.dumps(
        {"times": times, "repeat_identical": repeat_same, "frame": list(rf.frame.frame)}, indent=1))
    log(f"reference done ({time.perf_counter() - t0:.0f} s)")


def models(args) -> None:
    """CPU only, after `reference`: each layer's model on the GPU's inputs to it, both mma models."""
    work = Path(args.work)
    order = [s.name for s in LAYERS]
    jobs = [(work, layer, m) for layer in order for m in ("sm_90", "exact")]
    t0 = time.perf_counter()
    results = {}
    with ProcessPoolExecutor(min(len(jobs), args.jobs)) as pool:
        for layer, m, res, secs in pool.map(_model_layer, jobs):
            results.setdefault(layer, {})[m] = res
            log(f"model {layer} ({m}, {secs:.0f} s): " + ", ".join(
                f"{n.split('.')[-1]} {v['identical']:.1%} "
                f"{'-' if v['psnr_db'] is None else format(v['psnr_db'], '.1f')} dB" for n, v in res.items()))
    (work / "models_results.json").write_text(json.dumps(results, indent=1))
    log(f"models done ({time.perf_counter() - t0:.0f} s)")


def cells(args) -> None:
    from cupy.cuda import driver

    from rr.run.cuda import PreparedLaunch

    work = Path(args.work)
    while not (work / "cells.json").exists():
        time.sleep(5)
    recs = json.loads((work / "cells.json").read_text())
    after = dict(np.load(work / "ref_after.npz"))
    rf = ResidentFrame(work / "ref.frame")
    t0 = time.perf_counter()
    results = []
    for i, rec in enumerate(recs, 1):
        if rec["status"] != "compiled":
            results.append(rec)
            continue
        layer = rec["layer"]
        lyr = rf.frame.layer(layer)
        try:
            p = PreparedLaunch(rf.directory, lyr.launch, rf.device, module=Path(rec["cubin"]))
            rf.reset(rf.written_from(layer))
            rf.run(layer, replaced=p)
        except Exception as e:  # a fault poisons the context: record it and stop
            results.append({**rec, "status": "run_error", "message": f"{type(e).__name__}: {e}"})
            log(f"{layer} phase {rec['phase']} {rec['template']}: {type(e).__name__}: {e}; stopping")
            break
        differing = [n for n in rf.written_from(layer) if not same_bytes(rf.device.copy_back(n), after[n])]
        final = rf.frame.final
        results.append({**rec, "status": "ok", "frame_identical": final not in differing,
                        "layer_identical": not any(n in differing for n in rf.writes[layer]),
                        "first_differing": differing[0] if differing else None})
        driver.moduleUnload(p.module)
        if differing:  # the next cell's earlier layers must read the reference's bytes
            rf.restore(layer)
        if i % 50 == 0:
            log(f"ran {i}/{len(recs)} cells ({time.perf_counter() - t0:.0f} s)")
    # the reference once more at the end: nothing a cell did stayed behind
    rf.restore(rf.order[0])
    clean = all(same_bytes(rf.device.copy_back(n), after[n]) for n in rf.frame.buffers)
    (work / "cells_results.json").write_text(json.dumps(results, indent=1))
    ok = [r for r in results if r["status"] == "ok"]
    log(f"{len(ok)} cells run in {time.perf_counter() - t0:.0f} s; reference after them unchanged: {clean}")
    by = {}
    for r in results:
        key = (r["layer"], r["template"])
        s = by.setdefault(key, {"cells": 0, "frame_identical": 0, "other": []})
        s["cells"] += 1
        if r.get("frame_identical"):
            s["frame_identical"] += 1
        else:
            s["other"].append((r["phase"], r["status"], r.get("first_differing"), r.get("message", "")[:200]))
    for (layer, t), s in by.items():
        log(f"  {layer:<5} {t:<8} {s['frame_identical']}/{s['cells']} frame-identical"
            + (f"; not: {s['other'][:6]}" if s["other"] else ""))


def timing(args) -> None:
    """`rr time` (interleaved rounds over instance pairs, L2 flushed): the whole frame with enc2's
    phase --phase spliced by --template (isolate) against the reference frame, and enc2 alone
    likewise."""
    from rr.run.frame import replace_layer

    work = Path(args.work)
    tag = f"{args.template}_{args.phase}"
    iso = work / "cells" / f"enc2_{tag}.cubin"
    out = {}
    if not (work / f"{tag}.frame").exists():
        replace_layer(work / "ref.frame", "enc2", iso, work / f"{tag}.frame")
    if not (work / "enc2.alone").exists():
        rr("relaunch", work / "ref.frame", "--layer", "enc2", "--extract", "-o", work / "enc2.alone")
    rr("relaunch", work / "ref.frame", "--layer", "enc2", "--extract", "--module", iso, "-o", work / f"{tag}.alone")
    for label, a, b in (("frame", "ref.frame", f"{tag}.frame"), ("enc2", "enc2.alone", f"{tag}.alone")):
        rr("time", work / a, "--vs", work / b, "--time-limit", args.time_limit, "-o", work / f"time_{label}.json")
        t = json.loads((work / f"time_{label}.json").read_text())
        out[label] = {"reference_ms": t["reference"]["median_ms"], "spliced_ms": t["other"]["median_ms"],
                      "ratio": t["ratio"], "ratio_noise": t["ratio_noise"], "rounds": t["rounds"],
                      "instances": t["instances"], "instance_ratios": t["instance_ratios"]}
        log(f"{label}: reference {t['reference']['median_ms']:.4f} ms, {args.template} phase {args.phase} "
            f"{t['other']['median_ms']:.4f} ms, ratio {t['ratio']:.4f} ± {t['ratio_noise']:.2%} ({t['rounds']} rounds, "
            f"{t['instances']} instance pairs: {' '.join(f'{r:.4f}' for r in t['instance_ratios'])})")
    (work / f"timing_{tag}.json").write_text(json.dumps(out, indent=1))


# what `cost` reports of each timing: the cumulative seconds of these functions (cProfile), by label
COST_PARTS = {
    "read (frame.json, buffers)": ("read_resident",),
    "instances": ("_instance_pairs",),
    "  module loads": ("moduleLoadData",),
    "  buffers and images": ("handle",),
    "  of which images": ("_rgba16f_array",),
    "statistics": ("pairs_noise",),
}


def _named(name: str, names) -> bool:
    """A profile entry's function is one of `names`: a Python function by its name, a compiled one
    (cupy's driver calls) by the last part of its `<built-in method a.b.name>`."""
    bare = name.rstrip(">").replace(" ", ".").rsplit(".", 1)[-1]
    return name in names or bare in names


def cost(args) -> None:
    """Where a GPU job's time goes, as the worker spends it: the spliced frame's capture against the
    reference capture (as `rr measure` runs it), the frame timing and the layer-alone timing of
    `timing`'s directories, --repeats times in this one process with one Resident (the worker's),
    each under cProfile; per job its wall time, the parts above and the rest (warm-up and sampling),
    and the last repeat's whole profile (cost_<tag>_<job>.txt). With --free-pool the memory pool is
    emptied between jobs, as the worker does."""
    import cProfile
    import gc
    import pstats

    import cupy

    from rr.run.cuda import Resident
    from rr.run.timing import time_pair

    import io
    import shutil

    from rr.run.child import child_dispatch

    work = Path(args.work)
    tag = f"{args.template}_{args.phase}"
    resident = Resident()
    reference = work / "ref.capture"  # what the sweep's captures are compared with on the device
    if not reference.exists():
        reference.mkdir()
        child_dispatch(["cuda", str(work / "ref.frame"), str(reference), "", ""], resident)

    def capture():
        out = work / "cost.capture"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        code = child_dispatch(["cuda", str(work / f"{tag}.frame"), str(out), "", str(reference)], resident)
        return {"wall_s": json.loads((out / "run.json").read_text())["times_ms"]["frame"] / 1e3, "rounds": code}

    def timed(a, b):
        return lambda: time_pair(str(work / a), str(work / b), time_limit_s=args.time_limit, resident=resident)

    jobs = {"capture": capture, "frame": timed("ref.frame", f"{tag}.frame"),
            "enc2": timed("enc2.alone", f"{tag}.alone")}
    rows = []
    for repeat in range(args.repeats):
        for label, job in jobs.items():
            profile = cProfile.Profile()
            t0 = time.perf_counter()
            profile.enable()
            record = job()
            profile.disable()
            wall = time.perf_counter() - t0
            stats = pstats.Stats(profile).stats  # (file, line, name) -> (cc, nc, tt, ct, callers)
            parts = {part: sum(v[3] for (_, _, name), v in stats.items() if _named(name, names))
                     for part, names in COST_PARTS.items()}
            rows.append({"repeat": repeat, "timing": label, "wall_s": wall, "sampling_s": record["wall_s"],
                         "rounds": record["rounds"], **parts})
            log(f"{label} #{repeat}: {wall:.3f} s, sampling {record['wall_s']:.3f} s ({record['rounds']} rounds), "
                + ", ".join(f"{k.strip()} {v:.3f}" for k, v in parts.items()))
            if repeat == args.repeats - 1:  # the whole profile of the last repeat, by cumulative time
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(45)
                (work / f"cost_{tag}_{label}.txt").write_text(text.getvalue())
            resident.trim(None)
            gc.collect()
            if args.free_pool:
                cupy.get_default_memory_pool().free_all_blocks()
    (work / f"cost_{tag}.json").write_text(json.dumps(rows, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["prepare", "reference", "models", "cells", "timing", "cost"])
    ap.add_argument("--work", required=True)
    ap.add_argument("--frame", default="3840x2160")
    ap.add_argument("--layers", nargs="*")
    ap.add_argument("--templates", nargs="+", default=["regen", "isolate"])
    ap.add_argument("--phases", nargs="*", type=int, help="only these phases (a trial run)")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--phase", type=int, default=8)
    ap.add_argument("--template", default="isolate", help="timing: the spliced cell's template")
    ap.add_argument("--time-limit", type=float, default=10)
    ap.add_argument("--free-pool", action="store_true", help="cost: empty cupy's memory pool between timings")
    args = ap.parse_args()
    stages = {"prepare": prepare, "reference": reference, "models": models, "cells": cells, "timing": timing,
              "cost": cost}
    stages[args.stage](args)


if __name__ == "__main__":
    main()
