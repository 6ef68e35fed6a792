"""The run commands: run, relaunch, compare, time, measure, frame, sample-launch and launch-template (the workflow's captures and timings)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rr.cli.common import UserError, byte_count, dimensions, function_of, layer_modules, load_ptx, name_value, note, positive_seconds, recorded, relative_noise, resolve_ptx, unique_names
from rr.records import Status, write_record


def cmd_run(args) -> int:
    from rr.run.isolate import run_isolated

    if args.reference is not None and not Path(args.reference).is_dir():
        raise UserError(f"{args.reference}: no such capture directory (--reference: a run of the unspliced launch)")
    _module_record(args)
    if args.module is not None:
        return _run_with_module(args)
    record = run_isolated(args.launch, args.output, args.backend, args.timeout, args.mma, args.reference)
    return _report_run(args, record)


def _run_with_module(args) -> int:
    """`rr run LAUNCH --module FILE`: LAUNCH relaunched with FILE (or the module of a corpus
    directory that defines its entry) into a temporary directory beside the output — its buffers
    hard links to LAUNCH's where the file system allows —, run from there, removed after."""
    import tempfile

    from rr.run.frame import is_frame
    from rr.run.isolate import run_isolated
    from rr.run.launch import read_launch, relaunch

    if is_frame(args.launch):
        raise UserError(f"{args.launch} is a frame: --module replaces one launch's module; a frame's layer is "
                        "replaced with `rr frame FRAME --replace LAYER=MODULE` or `rr relaunch FRAME --layer LAYER "
                        "--module MODULE`")
    module = resolve_ptx(args.module, read_launch(args.launch).entry)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".rr-run-module-", dir=out.parent) as tmp:
        launch = Path(tmp) / "launch"
        relaunch(args.launch, module, launch, args.splice_record)
        record = run_isolated(launch, out, args.backend, args.timeout, args.mma, args.reference)
    return _report_run(args, record)


def _report_run(args, record: dict) -> int:
    """What `rr run` prints of a run's record, and its exit status."""
    if record["status"] != Status.OK:
        note(f"rr: run {record['status']}: {record['message']}")
        return 0 if args.record else 1
    dev = record.get("device", {}).get("name", "")
    times = record["times_ms"]
    if "layers" in record:  # a frame
        took = f"a frame of {len(record['layers'])} layers in {times['frame'] / 1e3:.2f} s"
    elif "launch_and_sync" in times:
        took = f"{times['launch_and_sync']:.3f} ms launch+sync"
    else:
        took = (f"{times['run'] / 1e3:.2f} s interpreting {record['lanes']} threads, mma model "
                f"{record['device']['mma_model']}")
    print(f"{args.output}: ok on {record['backend']} {dev}, {took}")
    if "linked_to_reference" in record:
        copied = record.get("copied_from_reference", [])
        print(f"{len(record['linked_to_reference'])} buffers the same as {args.reference}'s: hard links to its files"
              + (f"; {len(copied)} copied ({record['reference_link_error']})" if copied else ""))
    for where in [record] + record.get("layers", []):
        for warning in where.get("unwritten_registers", []):
            layer = f"layer {where['layer']}: " if "layer" in where else ""
            note(f"rr: warning: {layer}register {warning} before any write (read as zero)")
    return 0


def cmd_relaunch(args) -> int:
    from rr.run.frame import extract_layer, is_frame, replace_layer
    from rr.run.launch import LaunchError, relaunch, write_launch_error

    _module_record(args)
    try:
        if is_frame(args.launch):
            if not args.layer:
                raise LaunchError(f"{args.launch} is a frame: say which layer's module --module replaces (--layer)")
            if args.extract:
                launch = extract_layer(args.launch, args.layer, args.output, args.module, args.splice_record)
                print(f"{args.output}: layer {args.layer} of the frame {args.launch} as a launch of its own"
                      + (f", module {args.module}" if args.module else ""))
                return 0
            if not args.module:
                raise LaunchError("rr relaunch: --module is required, except with --extract")
            frame = replace_layer(args.launch, args.layer, args.module, args.output, args.resume, args.splice_record)
            print(f"{args.output}: the frame of {args.launch} ({len(frame.layers)} layers) with layer "
                  f"{args.layer} from {args.module}")
            return 0
        if args.layer or args.resume or args.extract:
            raise LaunchError(f"{args.launch} is one launch, not a frame: --layer, --resume and --extract apply to "
                              "frames")
        if not args.module:
            raise LaunchError("rr relaunch: --module is required")
        launch = relaunch(args.launch, args.module, args.output, args.splice_record)
    except LaunchError as e:  # with --record, the runs of the directory record why
        return recorded(args, e, lambda _, error=e: write_launch_error(args.output, error), "no launch")
    print(f"{args.output}: {launch.entry} from {args.module}, buffers of {args.launch}")
    return 0


def cmd_compare(args) -> int:
    import json

    from rr.run.frame import compare_runs
    from rr.run.launch import LaunchError

    try:
        compared = compare_runs(args.a, args.b)
    except LaunchError as e:
        if args.record and args.output:  # a failed capture has no buffers: nothing to compare
            write_record(args.output, [])
            note(f"rr: nothing compared: {e}")
            return 0
        raise UserError(str(e)) from None
    except ValueError as e:
        raise UserError(str(e)) from None
    rows, layers, linked = compared.rows, compared.layers, compared.linked
    if compared.only:  # e.g. the probe buffer of a probe splice
        print(f"rr: compared the {len(rows)} buffers both runs have; not compared: {', '.join(compared.only)}",
              file=sys.stderr)
    if linked:
        print(f"rr: {len(linked)} of the {len(rows)} buffers are one file in both runs (hard links): identical, "
              "their bytes not compared", file=sys.stderr)
    dicts = compared.records()
    if args.output:
        write_record(args.output, dicts)
    if args.json:
        print(json.dumps(dicts, indent=2))
    else:
        print(f"{'buffer':<16} {'dtype':<8} {'identical':<9} {'diff bytes':>12} {'share':>8} "
              f"{'max |a-b|':>10} {'PSNR dB':>8}  first difference")
        for r in rows:
            psnr = "inf" if r.psnr_db == float("inf") else ("-" if r.psnr_db is None else f"{r.psnr_db:.2f}")
            mad = "-" if r.max_abs_diff is None else f"{r.max_abs_diff:.4g}"
            first = "" if r.first_index is None else f"{list(r.first_index)}: {r.first_values[0]:.6g} vs {r.first_values[1]:.6g}"
            print(f"{r.buffer:<16} {r.dtype:<8} {str(r.identical):<9} {r.differing_bytes:>12} "
                  f"{r.differing_share:>8.2%} {mad:>10} {psnr:>8}  {first}")
        if any(layers.values()):  # two frame runs: the final frame's verdict, and where a difference began
            differing = next((r for r in rows[1:] if not r.identical), None)
            print(f"final frame {rows[0].buffer}: {'identical' if rows[0].identical else 'differs'}"
                  + (f"; first differing layer {layers[differing.buffer]} ({differing.buffer})" if differing else ""))
    return 0 if args.record or all(r.identical for r in rows) else 1


def cmd_measure(args) -> int:
    from rr.run.measure import Measurement, measure
    from rr.splice.recipe import recipe_name

    recipe = recipe_name(args.recipe)  # the records' names in OUTPUT: a plain name, never a path
    for option, path in (("--reference", args.reference), ("--alone", args.alone)):
        if path is not None and not Path(path).is_dir():
            raise UserError(f"{path}: no such directory ({option})")
    m = Measurement(Path(args.launch), Path(args.module), Path(args.reference), args.layer,
                    Path(args.alone) if args.alone else None, args.backend, args.noise, args.time_limit, args.timeout,
                    Path(args.splice_record) if args.splice_record else None)
    records = measure(m, Path(args.output), recipe, args.keep, say=lambda line: print(line, flush=True))
    failed = {kind.name: r for kind, r in records.items() if isinstance(r, dict) and r.get("status") != Status.OK}
    for kind, r in failed.items():
        note(f"rr: {recipe}: {kind} {r['status']}: {r.get('message', '')}")
    return 0 if args.record or not failed else 1


def cmd_time(args) -> int:
    import json

    from rr.run.isolate import time_isolated

    record = time_isolated(args.launch, args.vs, args.noise, args.time_limit, args.backend)
    if args.output:
        write_record(args.output, record)
    if record["status"] != Status.OK:
        note(f"rr: time {record['status']}: {record['message']}")
        return 0 if args.record else 1
    a, b = record["reference"], record["other"]
    for label, s, d in (("reference", a, args.launch), ("other", b, args.vs)):
        print(f"{label:<9} {d}: median {s['median_ms']:.4f} ms (min {s['min_ms']:.4f}, max "
              f"{s['max_ms']:.4f}), noise {s['noise']:.2%}, {s['samples']} samples, "
              f"{s['throttled']} throttled")
    clocks = record["sm_clock_mhz"]
    print(f"ratio other/reference = {record['ratio']:.4f} ± {record['ratio_noise']:.2%} "
          f"({record['stop']}; {record['rounds']} rounds over {record.get('instances', 1)} instance pairs); "
          f"{record['device']['name']}, driver "
          f"{record['device'].get('driver_version') or record['device']['driver']}"
          + (f", SM clock {clocks['min']}-{clocks['max']} MHz" if clocks else ", SM clock unavailable"))
    if args.json:
        print(json.dumps(record, indent=2))
    return 0


def cmd_sample_launch(args) -> int:
    from rr.corpus.sample import sample_launch

    module = resolve_ptx(args.module, "cuda_dldn_engine_swin_sample_kernel")
    sample_launch(args.output, module, args.seed)
    print(f"{args.output}: launch of the sample kernel from {module} (seed {args.seed})")
    return 0


def _buffer_option(text: str):
    """`NAME=BYTES[:TYPE][:FILL]` → (name, BufferRequest)."""
    from rr.run.launch_template import BUFFER_TYPES, FILLS, BufferRequest

    name, value = name_value(text)
    size, *rest = value.split(":")
    types = [r for r in rest if r in BUFFER_TYPES]
    fills = [r for r in rest if r in FILLS]
    if len(types) > 1 or len(fills) > 1 or len(types) + len(fills) != len(rest):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=BYTES[:TYPE][:FILL] (TYPE {', '.join(BUFFER_TYPES)}; "
                                         f"FILL {', '.join(FILLS)})")
    return name, BufferRequest(byte_count(size), (types or [None])[0], (fills or [None])[0])


def cmd_launch_template(args) -> int:
    from rr.run.launch_template import write_template

    module, path = load_ptx(args.file, args.entry)
    function = function_of(module, args.entry)
    if function.kind != "entry":
        raise UserError(f"{path}: {args.entry} is a .func, not a kernel entry")
    lines = write_template(Path(path), function, module, Path(args.output), args.grid, args.block,
                           unique_names("--buffer", args.buffer), unique_names("--scalar", args.scalar), args.seed)
    print(f"{args.output}: launch of {args.entry} from {path}, grid {','.join(map(str, args.grid))}, block "
          f"{','.join(map(str, args.block))}, {len(function.params)} parameter{'s' * (len(function.params) != 1)}:")
    print("\n".join(lines))
    return 0


def cmd_frame(args) -> int:
    """`rr frame LAYOUT --backend B [--replace LAYER=MODULE …] -o OUT`: the whole frame, in one child
    process, with the given layers' modules replaced."""
    from rr.io import scratch_dir
    from rr.run.frame import read_frame, replace_layer
    from rr.run.isolate import run_isolated
    from rr.run.launch import LaunchError

    replacements = layer_modules("--replace", "LAYER=MODULE", args.replace)
    layout = Path(args.layout)
    try:
        read_frame(layout)
        with scratch_dir(args.output) as tmp:  # the replaced layouts, beside the output
            for i, (layer, module) in enumerate(replacements):
                step = tmp / f"step{i}"
                replace_layer(layout, layer, module, step)
                layout = step
            record = run_isolated(layout, args.output, args.backend, args.timeout)
    except LaunchError as e:
        raise UserError(str(e)) from None
    if record["status"] != Status.OK:
        note(f"rr: frame {record['status']}: {record['message']}")
        return 0 if args.record else 1
    times = ", ".join(f"{lyr['layer']} {next(iter(lyr['times_ms'].values())):.1f}" for lyr in record["layers"])
    print(f"{args.output}: frame {record['frame'][0]}x{record['frame'][1]} on {record['backend']} "
          f"in {record['times_ms']['frame']:.1f} ms ({times} ms)")
    return 0


def _splice_record_option(s) -> None:
    s.add_argument("--splice-record", metavar="JSON",
                   help="the splice record of --module (rr splice -o OUT.ptx writes OUT.ptx.splice.json): a probe "
                        "splice's says what its extra parameter points to, which the launch then passes; nothing is "
                        "looked for beside the module")


def _module_record(args) -> None:
    """UserError for a --splice-record without the --module it is of."""
    if args.splice_record and not args.module:
        raise UserError("--splice-record is the record of --module's splice: it goes with --module")


def add_parsers(sub) -> None:
    s = sub.add_parser("run", help="run a launch description (in a child process) and capture its buffers")
    s.add_argument("launch", help="launch directory (launch.json and .npy buffers)")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cuda (cupy), cpu (rr's PTX interpreter) or auto: cuda when a GPU is present "
                        "(default: %(default)s)")
    s.add_argument("-o", "--output", required=True, help="output directory (same format + run.json)")
    s.add_argument("--timeout", type=positive_seconds, default=120,
                   help="seconds before the run is killed (default: %(default)s)")
    # rr.numerics.mma.MMA_MODELS and DEFAULT_MMA, named here so that parsing imports no numpy (tested)
    s.add_argument("--mma", choices=("exact", "sm_90"), default="sm_90",
                   help="the cpu backend's mma model: exact (the whole sum rounded once) or sm_90 (the H200's "
                        "two HMMA, docs/numerics.md); the run record names it (default: %(default)s)")
    s.add_argument("--record", action="store_true",
                   help="exit 0 once the record is written, whatever it says (for pipelines)")
    s.add_argument("--reference", metavar="CAPTURE",
                   help="a run of the unspliced launch or frame (what this run is compared with): each output "
                        "buffer whose bytes equal CAPTURE's file of the same name is a hard link to that file "
                        "(a copy across file systems), named in run.json's linked_to_reference")
    s.add_argument("--module", metavar="FILE",
                   help="run LAUNCH with this module instead of its own (as `rr relaunch LAUNCH --module FILE` "
                        "would make it): the kernel's PTX for the cpu backend where LAUNCH's module is a cubin or "
                        "a fatbin of SASS alone (a capture's fatbin with PTX in it needs none: the cpu backend "
                        "runs its PTX), or a corpus directory made by `rr extract` (the module defining the "
                        "launch's entry)")
    _splice_record_option(s)
    s.set_defaults(func=cmd_run, reads=("launch", "reference", "module", "splice_record"), writes="dir")

    s = sub.add_parser("relaunch", help="the same launch with another module (a splice, a cubin)")
    s.add_argument("launch", help="launch directory")
    s.add_argument("--module", help="the PTX or cubin to launch instead")
    _splice_record_option(s)
    s.add_argument("--layer", help="for a frame directory: the layer whose module --module replaces")
    s.add_argument("--extract", action="store_true", help="for a frame: write --layer alone as a launch directory "
                   "(its buffers as LAUNCH holds them; with --module, that module instead)")
    s.add_argument("--resume", metavar="CAPTURE", help="for a frame: a run of LAUNCH (its reference capture); the "
                   "new frame starts at --layer, with what the layers before it wrote taken from CAPTURE")
    s.add_argument("-o", "--output", required=True, help="the new launch directory")
    s.add_argument("--record", action="store_true",
                   help="when LAUNCH cannot be used, write a directory saying why (the runs of it record it) and exit 0")
    s.set_defaults(func=cmd_relaunch, reads=("launch", "module", "resume", "splice_record"), writes="dir")

    s = sub.add_parser("compare", help="compare two runs buffer by buffer (exit 0 iff identical)")
    s.add_argument("a", help="a launch or run directory (the reference)")
    s.add_argument("b", help="another of the same launch")
    s.add_argument("--json", action="store_true", help="print the comparison as JSON instead of the table")
    s.add_argument("-o", "--output", help="write the comparison (a JSON list) to this file")
    s.add_argument("--record", action="store_true",
                   help="exit 0 once the record is written, whatever it says (for pipelines)")
    s.set_defaults(func=cmd_compare, reads=("a", "b"))

    s = sub.add_parser("time", help="time a launch against another, interleaved, with L2 flushes (GPU only)")
    s.add_argument("launch", help="the reference launch directory")
    s.add_argument("--vs", required=True, help="the other launch directory")
    s.add_argument("--noise", type=relative_noise, default=0.005,
                   help="relative noise target of each median (default: %(default)s)")
    s.add_argument("--time-limit", type=positive_seconds, default=30.0,
                   help="seconds of sampling at most (default: %(default)s)")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cuda or auto (cuda when a GPU is present); cpu records that it gives no timing "
                        "(default: %(default)s)")
    s.add_argument("-o", "--output", help="timing.json to write")
    s.add_argument("--json", action="store_true", help="also print the record as JSON")
    s.add_argument("--record", action="store_true",
                   help="exit 0 once the record is written, whatever it says (for pipelines)")
    s.set_defaults(func=cmd_time, reads=("launch", "vs"))

    s = sub.add_parser("measure", help="a splice measured whole: launched, captured, compared with the reference "
                       "and (on cuda) timed, each record written as its own command writes it")
    s.add_argument("launch", help="the layer's launch directory, or the frame layout")
    s.add_argument("--module", required=True, help="the splice's module (a cubin on cuda, PTX on the cpu backend)")
    _splice_record_option(s)
    s.add_argument("--reference", required=True, metavar="CAPTURE", help="the capture of the unspliced LAUNCH")
    s.add_argument("--layer", help="for a frame: the layer the splice replaces")
    s.add_argument("--alone", metavar="LAUNCH", help="for a frame on cuda: the layer alone from the reference "
                   "(rr relaunch CAPTURE --layer L --extract); the splice's layer is also timed against it")
    s.add_argument("--recipe", required=True, help="the recipe's name: the records are OUTPUT/<recipe>.<kind>.json")
    s.add_argument("-o", "--output", required=True, help="the cell's directory, where the records go")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cuda, cpu (no timing) or auto (default: %(default)s)")
    s.add_argument("--noise", type=relative_noise, default=0.005, help="the timings' noise target (default: %(default)s)")
    s.add_argument("--time-limit", type=positive_seconds, default=30.0,
                   help="seconds of sampling at most, each timing (default: %(default)s)")
    s.add_argument("--timeout", type=positive_seconds, default=3600, help="seconds before the capture is killed "
                   "(default: %(default)s)")
    s.add_argument("--keep", action="store_true", help="keep the splice's launch, capture and layer-alone "
                   "directories beside the records (<recipe>.launch, .capture, .alone.launch)")
    s.add_argument("--record", action="store_true",
                   help="exit 0 once the records are written, whatever they say (for pipelines)")
    s.set_defaults(func=cmd_measure, reads=("launch", "module", "reference", "alone", "splice_record"), writes="into")

    s = sub.add_parser("frame", help="run a whole frame (every layer in order on shared buffers), optionally "
                       "with layers' modules replaced", description=" ".join(cmd_frame.__doc__.split()))
    s.add_argument("layout", help="a frame directory (rr launch frame CORPUS --frame WxH -o DIR)")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto", help="default: %(default)s")
    s.add_argument("--replace", action="append", default=[], metavar="LAYER=MODULE",
                   help="run LAYER with this module (a splice, a cubin) instead; repeatable")
    s.add_argument("--timeout", type=positive_seconds, default=600, help="seconds before the run is killed "
                   "(default: %(default)s)")
    s.add_argument("-o", "--output", required=True, help="output directory: the frame with every buffer after it")
    s.add_argument("--record", action="store_true", help="exit 0 once the run's record is written (for pipelines)")
    s.set_defaults(func=cmd_frame, reads=("layout",), writes="dir")

    s = sub.add_parser("sample-launch", help="a launch directory for the sample kernel (random inputs)")
    s.add_argument("module", help="the sample kernel's PTX, or a corpus directory")
    s.add_argument("--seed", type=int, default=3, help="seed of the random inputs (default: %(default)s)")
    s.add_argument("-o", "--output", required=True, help="the launch directory to write")
    s.set_defaults(func=cmd_sample_launch, reads=("module",), writes="dir")

    s = sub.add_parser(
        "launch-template", help="a launch directory for a PTX entry, its fields from the entry's .param list",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A launch directory for a PTX entry, its fields from the entry's .param list, for\n"
                    "`rr run DIR --backend cpu` without a GPU (docs/formats.md, Launch descriptions).",
        epilog="Parameters are named as in the PTX less the ENTRY_ prefix nvcc gives them (saxpy_param_0\n"
               "is param_0). A struct or array parameter (.b8 p[N]) is one value per member the kernel\n"
               "reads, p.OFFSET, typed as its ld.param reads it; the bytes it never reads are zero.\n"
               "A 64-bit parameter (or member) is a pointer, and takes --buffer, when the kernel\n"
               "addresses memory through it: a load, store, atomic or reduction whose address is the\n"
               "parameter plus offsets, generic or after cvta.to.global (the params `rr spec` lists as\n"
               "read / written). Any other parameter is a scalar of its type and takes --scalar\n"
               "(one never read is zero). --buffer on a 64-bit parameter makes it a buffer whatever\n"
               "the kernel seems to do with it (a pointer only handed to a .func, or read by cp.async).\n"
               "Every pointer and every scalar the kernel reads must be given: the missing ones, and\n"
               "names the entry has not, are refused together, naming each. A kernel of one struct\n"
               "parameter is launched as a block (pointers inside it are buffers); otherwise one field\n"
               "per parameter, where a struct is its bytes (no pointers inside). Texture and surface\n"
               "objects are refused (capture the launch, or write it by hand).")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to launch")
    s.add_argument("-o", "--output", required=True, help="the launch directory to write")
    s.add_argument("--grid", type=dimensions, default=(1, 1, 1), metavar="X,Y,Z", help="blocks (default: 1,1,1)")
    s.add_argument("--block", type=dimensions, default=(32, 1, 1), metavar="X,Y,Z",
                   help="threads per block (default: 32,1,1, one warp)")
    s.add_argument("--buffer", type=_buffer_option, action="append", default=[], metavar="NAME=BYTES[:TYPE][:FILL]",
                   help="a pointer's buffer: BYTES (65536, 64K, 1M) of values of TYPE e4m3, f16 or f32 (as "
                        "rr compare reads them; bytes if none), FILL zeros or random (e4m3: any finite value; "
                        "f16, f32: uniform in [-1, 1); bytes: 0-255), by default random where the kernel reads "
                        "the buffer and zeros where it only writes it. Repeatable")
    s.add_argument("--scalar", type=name_value, action="append", default=[], metavar="NAME=VALUE",
                   help="a scalar's value: an integer (0x… too; a negative one for a .u32 is its two's complement, "
                        "as nvcc declares every int .u32) or a number. Repeatable")
    s.add_argument("--seed", type=int, default=7, help="seed of the random fills (default: %(default)s)")
    s.set_defaults(func=cmd_launch_template, reads=("file",), writes="dir")
