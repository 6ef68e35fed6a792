"""Probe the `mma.sync` forms beside the engine's e4m3 one — m16n8k16 f16 (f16 and f32
accumulate), m16n8k16 bf16, m16n8k8 tf32, m16n8k32 s8 — on a backend, and score rr's models of
them (rr.numerics.forms: `sm_90`, and the order-free `exact`) on what it computed. On an H200 this
is the check the models still lack (docs/numerics.md, "The other mma forms"):

    python benchmarks/mma_forms_probe.py --backend cuda --warps 4096 --seed 1 --save DIR
    python benchmarks/mma_forms_probe.py --replay DIR           # score saved probes again, no GPU
    python benchmarks/mma_forms_probe.py --replay DIR --subset tests/data/probes --per-design 64
    python benchmarks/mma_forms_probe.py --backend cpu --warps 8  # the script itself, without a GPU

Each form runs one kernel (one warp a block: its A, B and C fragments loaded per lane, one mma, D
stored) as a launch directory through `rr run`, on random inputs and on adversarial designs in
the MMA-Sim manner (inputs that isolate one property: a wide spread of exponents, one big term
among small ones of one sign — truncation —, cancelling pairs, C far from the products, special
values). With --save, `DIR/forms_<form>.npz` keeps A, B (bytes, matrix form: rr.run.fragments), C,
D, the design of each warp and the seed. It prints, per form and design, the share of D's bits
each model reproduces. On the cpu backend `sm_90` is what computed D (100 % says the launch,
the fragment layouts and the replay agree); only the GPU's figures check the model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
from common import work_dir

from rr.numerics.forms import FORM_MODELS, MmaForm, mma_form
from rr.run import fragments
from rr.run.launch import Buffer, Field, Launch, write_launch

# name -> (shape, A/B type, accumulator), the forms probed
FORMS = {"f16_f32": ((16, 8, 16), "f16", "f32"), "f16_f16": ((16, 8, 16), "f16", "f16"),
         "bf16": ((16, 8, 16), "bf16", "f32"), "tf32": ((16, 8, 8), "tf32", "f32"), "s8": ((16, 8, 32), "s8", "s32")}
ELEMENT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "s8": np.int8}
ACC = {"f32": np.float32, "f16": np.float16, "s32": np.int32}


def kernel_ptx(form: MmaForm) -> str:
    """One warp a block: lane l of block w loads its A (4 words), B (2) and C (4, or 2 f16x2)
    from word arrays laid out [warp, register, lane], runs the mma, stores D likewise."""
    m, n, k = form.shape
    counts = {"a": 4, "b": 2, "c": 2 if form.acc == "f16" else 4}
    lines = ["mov.u32 %w, %ctaid.x;", "mov.u32 %l, %tid.x;"]
    for param, (x, count) in enumerate([*counts.items(), ("d", counts["c"])]):
        lines += [f"ld.param.u64 %p{x}, [probe_param_{param}];", f"mad.wide.u32 %p{x}, %w, {count * 128}, %p{x};",
                  f"mad.wide.u32 %p{x}, %l, 4, %p{x};"]
        if x != "d":
            lines += [f"ld.global.u32 %{x}{i}, [%p{x}+{128 * i}];" for i in range(count)]

    def regs(x: str, count: int) -> str:
        return "{" + ", ".join(f"%{x}{i}" for i in range(count)) + "}"
    lines.append(f"mma.sync.aligned.m{m}n{n}k{k}.row.col.{form.acc}.{form.ab}.{form.ab}.{form.acc} "
                 f"{regs('d', counts['c'])}, {regs('a', 4)}, {regs('b', 2)}, {regs('c', counts['c'])};")
    lines += [f"st.global.u32 [%pd+{128 * i}], %d{i};" for i in range(counts["c"])] + ["ret;"]
    params = ", ".join(f".param .u64 probe_param_{i}" for i in range(4))
    return (".version 8.7\n.target sm_90\n.address_size 64\n"
            f".visible .entry probe({params})\n.reqntid 32\n{{\n"
            "  .reg .b32 %w, %l, %a<4>, %b<2>, %c<4>, %d<4>;\n  .reg .b64 %pa, %pb, %pc, %pd;\n  "
            + "\n  ".join(lines) + "\n}\n")


# -- inputs ----------------------------------------------------------------------------------------

def _elements(x: np.ndarray, ab: str) -> np.ndarray:
    """Values (…, rows, K) → the bytes the fragments hold (…, rows, 32)."""
    if ab == "s8":
        return np.clip(np.rint(x), -128, 127).astype(np.int8).view(np.uint8)
    return np.ascontiguousarray(x.astype(np.float32).astype(ELEMENT[ab])).view(np.uint8)


def inputs(rng, form: MmaForm, n: int, design: str) -> tuple:
    """A (n, 16, 32) and B (n, 32, 8) bytes and C (n, 16, 8) for one design."""
    k = form.shape[2]
    a = rng.normal(size=(n, 16, k))
    bt = rng.normal(size=(n, 8, k))
    c = rng.normal(scale=4, size=(n, 16, 8))
    if form.integer:
        a, bt, c = a * 60, bt * 60, rng.integers(-(1 << 31), 1 << 31, (n, 16, 8))
        if design == "wrap":  # sums past 2^31: the wrap (or the clamp)
            a, bt, c = np.full_like(a, 127), np.full_like(bt, 127), np.full((n, 16, 8), (1 << 31) - 1000)
    elif design == "spread":  # exponents over much of the range
        a *= 2.0 ** rng.integers(-14, 8, a.shape)
        bt *= 2.0 ** rng.integers(-14, 8, bt.shape)
    elif design == "big_and_small":  # one big term, the rest small and of one sign: the cut's direction
        a, bt = np.abs(a) * 2.0 ** -12, np.abs(bt)
        a[..., 0] = 1.0
        c = np.abs(c) * 2.0 ** -10
    elif design == "cancel":  # pairs that cancel, leaving the small terms
        a[..., 1::2] = a[..., 0::2]
        bt[..., 1::2] = -bt[..., 0::2]
        a[..., :2] *= 2.0 ** 10
    elif design == "c_dominates":
        c = c * 2.0 ** rng.integers(-20, 20, c.shape)
    elif design == "specials":  # inf, NaN, subnormal operands and C
        a.flat[rng.integers(0, a.size, a.size // 64)] = np.inf
        bt.flat[rng.integers(0, bt.size, bt.size // 64)] = np.nan
        a.flat[rng.integers(0, a.size, a.size // 16)] = 2.0 ** -20
        c.flat[rng.integers(0, c.size, c.size // 16)] = -np.inf
    a_bytes = _elements(a, form.ab)
    b_bytes = np.ascontiguousarray(np.swapaxes(_elements(bt, form.ab), -1, -2))
    with np.errstate(over="ignore"):  # C past f16's range: ±inf, as meant
        return a_bytes, b_bytes, np.asarray(c).astype(ACC[form.acc])


DESIGNS = {"float": ("random", "spread", "big_and_small", "cancel", "c_dominates", "specials"),
           "integer": ("random", "wrap")}


# -- running ---------------------------------------------------------------------------------------

def run(form: MmaForm, a, b, c, backend: str, work: Path) -> np.ndarray:
    """D (n, 16, 8) of `backend` for the inputs (matrix form), through a launch directory and `rr run`."""
    n = a.shape[0]
    words = {"a": np.stack(fragments.a_registers(a), 1), "b": np.stack(fragments.b_registers(b), 1)}
    c_words = fragments.d_registers(c.view(np.float32) if form.integer else c)
    words["c"] = np.stack(c_words, 1)
    words["d"] = np.zeros_like(words["c"])
    launch = Launch(entry="probe", module="probe.ptx", grid=(n, 1, 1), block=(32, 1, 1), layout="list",
                    fields=tuple(Field("buffer", buffer=x) for x in "abcd"),
                    buffers={x: Buffer(x, f"{x}.npy", "out" if x == "d" else "in") for x in "abcd"})
    (work / "probe.ptx").write_text(kernel_ptx(form))
    write_launch(work / "launch", launch, {x: np.ascontiguousarray(w) for x, w in words.items()}, work / "probe.ptx")
    r = subprocess.run([sys.executable, "-m", "rr.cli", "run", work / "launch", "--backend", backend,
                        "-o", work / "out"], capture_output=True, text=True, check=False)
    if r.returncode:
        sys.exit(f"rr run: exit {r.returncode}\n{r.stdout}{r.stderr}")
    d = np.load(work / "out" / "d.npy").reshape(n, -1, 32)
    matrix = fragments.c_matrix([d[:, i] for i in range(d.shape[1])])
    return matrix.view(np.int32) if form.integer else matrix


def probed_form(name: str) -> MmaForm:
    shape, ab, acc = FORMS[name]
    return mma_form(shape, (acc, ab, ab, acc))


def score(name: str, z: dict) -> None:
    form = probed_form(name)
    bits = np.uint16 if z["D"].dtype == np.float16 else np.uint32
    for model_name, model in FORM_MODELS.items():
        d = model(form, z["A"], z["B"], z["C"])
        same = d.view(bits) == z["D"].view(bits)
        per = "  ".join(f"{design} {same[z['design'] == i].mean():.4%}" for i, design in enumerate(z["designs"])
                        if (z["design"] == i).any())
        print(f"{name:<8} {model_name:<6} all {same.mean():8.4%}   {per}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="cuda", help="cuda (the H200) or cpu (the interpreter: a self-check)")
    ap.add_argument("--warps", type=int, default=1024, help="warps per design")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--forms", nargs="+", default=list(FORMS), choices=list(FORMS))
    ap.add_argument("--save", help="keep each form's probes here (forms_<form>.npz)")
    ap.add_argument("--replay", help="score the probes saved in this directory again (no GPU)")
    ap.add_argument("--subset", help="with --replay: write the first --per-design warps of each design of each "
                    "saved form here (forms_h200_<form>.npz: the test data of tests/test_generators_forms.py)")
    ap.add_argument("--per-design", type=int, default=64)
    ap.add_argument("--out", help="work directory (default: a new temporary one)")
    args = ap.parse_args()
    if args.replay:
        for name in args.forms:
            path = Path(args.replay) / f"forms_{name}.npz"
            if path.exists():
                z = dict(np.load(path))
                score(name, z)
                if args.subset:
                    keep = np.concatenate([np.flatnonzero(z["design"] == i)[:args.per_design]
                                           for i in range(len(z["designs"]))])
                    np.savez_compressed(Path(args.subset) / f"forms_h200_{name}.npz",
                                        **{k: (v[keep] if k in {"A", "B", "C", "D", "design"} else v) for k, v in z.items()})
        return
    work = work_dir(args.out)
    for name in args.forms:
        form = probed_form(name)
        designs = DESIGNS["integer" if form.integer else "float"]
        rng = np.random.default_rng([args.seed, list(FORMS).index(name)])
        parts = [inputs(rng, form, args.warps, design) for design in designs]
        a, b, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
        design = np.repeat(np.arange(len(designs), dtype=np.uint8), args.warps)
        d = run(form, a, b, c, args.backend, work)
        z = {"A": a, "B": b, "C": c, "D": d, "design": design, "designs": np.array(designs),
             "seed": np.int64(args.seed), "backend": np.array(args.backend)}
        if args.save:
            Path(args.save).mkdir(parents=True, exist_ok=True)
            np.savez_compressed(Path(args.save) / f"forms_{name}.npz", **z)
        score(name, z)
    print(json.dumps({"backend": args.backend, "warps_per_design": args.warps, "seed": args.seed}))


if __name__ == "__main__":
    main()
