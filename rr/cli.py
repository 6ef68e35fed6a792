"""The `rr` command line: one subcommand per stage, each runnable alone on the files of the stage
before it. Errors in the input are reported as `rr: error: …` with exit status 2, no traceback,
and no output file."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rr import __version__
from rr.validation import cut, open_regular, printable, read_bytes


class UserError(Exception):
    """Bad input or arguments: printed without a traceback, exit status 2."""


class NoPhases(UserError):
    """An entry without mma statements: reported with exit status 1."""


def _bounded(parse, ok, what: str):
    """An argparse type: `parse` of the text, refused as "TEXT is not WHAT" unless `ok` of it."""
    def check(text: str):
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"{text} is not {what}")
        return value
    return check


_phase_number = _bounded(int, lambda v: v >= 1, "a phase number (1, 2, …)")  # 0 is not "not given"
_seconds = _bounded(float, lambda v: 0 < v < float("inf"), "a positive number of seconds")
_noise = _bounded(float, lambda v: 0 < v < 1, "a relative noise between 0 and 1 (0.005 is 0.5 %)")


def _resolve(path: str, entry: str | None = None) -> Path:
    """A PTX file as given, or — for a corpus directory made by `rr extract` — the module that
    defines `entry`."""
    p = Path(path)
    if p.is_dir() and (p / "index.parquet").is_file() and entry:
        from rr.corpus import find_entry

        hits = [m for m, e in find_entry(p, f"^{re.escape(entry)}$")]
        if not hits:
            raise UserError(f"{path}: no module in this corpus defines entry {entry!r}")
        return hits[0]
    if p.is_dir():
        raise UserError(f"{path}: a directory, not a PTX file or a corpus made by `rr extract` (no index.parquet)"
                        if entry else f"{path}: is a directory")
    try:
        open_regular(p).close()  # InvalidInput for a FIFO (it would block the read) or a device
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    return p


def _load(path: str, entry: str | None = None):
    """Parse a PTX file, or the module of `entry` in a corpus directory."""
    from rr.ptx import parse_file

    p = _resolve(path, entry)
    return parse_file(p), str(p)


def _function(module, name: str):
    try:
        return module.function(name)
    except KeyError as e:
        raise UserError(e.args[0]) from None


def cmd_entries(args) -> int:
    module, _ = _load(args.file)
    rows = []
    for f in module.functions:
        if not f.has_body:
            continue
        n = sum(1 for _ in f.instructions())
        rows.append((f.kind, f.name, n, f.line, f.last_line))
    if not rows:  # a module of declarations only (a library's prototypes, globals) is not an error
        print(f"{args.file}: no entries (no .entry or .func with a body)")
        return 0
    width = max(len(r[1]) for r in rows)
    print(f"{'kind':<6} {'name':<{width}} {'statements':>10} {'lines':>7} {'first-last':>15}")
    for kind, name, n, first, last in rows:
        print(f"{kind:<6} {name:<{width}} {n:>10} {last - first + 1:>7} {f'{first}-{last}':>15}")
    return 0


def cmd_roundtrip(args) -> int:
    """emit(parse(file)) against the file's bytes, line ends (CR LF, lone CR) included."""
    from rr.ptx import emit

    module, source = _load(args.file)
    original = read_bytes(source)
    out = emit(module).encode("utf-8")
    lines = original.count(b"\n") + (not original.endswith(b"\n") and bool(original))
    if out == original:
        print(f"{args.file}: round trip exact ({len(original)} bytes, {lines} lines)")
        return 0
    at = next((i for i, (x, y) in enumerate(zip(original, out)) if x != y), min(len(original), len(out)))
    line = original.count(b"\n", 0, at) + 1

    def line_of(data: bytes) -> str:
        if at >= len(data):
            return "<end of file>"
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        return repr(data[start:end + 1 if end >= 0 else len(data)][:300].decode("utf-8", "replace"))

    print(f"{args.file}:{line}: round trip differs at byte {at}\n  file:    {line_of(original)}\n"
          f"  emitted: {line_of(out)}")
    return 1


def cmd_linearise(args) -> int:
    from rr.io import write_parquet
    from rr.ptx import linearise, statements_table

    module, source = _load(args.file, args.entry)
    f = _function(module, args.entry)
    statements = linearise(f)
    write_parquet(args.output, statements_table(statements, f.name, source))
    print(f"{args.output}: {len(statements)} statements of {f.name} "
          f"(lines {f.line}-{f.last_line})")
    return 0


def cmd_extract(args) -> int:
    from rr.corpus import MAX_MODULE_BYTES, CorpusError, find_entry, iter_source, write_corpus

    warnings = []

    def warn(message: str) -> None:
        warnings.append(message)
        _stderr(f"rr: warning: {message}")

    try:
        table = write_corpus(iter_source(args.source, warn, args.max_module_bytes or MAX_MODULE_BYTES),
                             args.output, args.source)
    except CorpusError as e:
        raise UserError(str(e)) from None
    distinct = len(set(table.column("hash").to_pylist()))
    print(f"{args.output}: {distinct} distinct modules from {table.num_rows} occurrences "
          f"({len(warnings)} warnings)")
    if args.find:
        hits = find_entry(args.output, args.find)
        if not hits:
            _stderr(f"rr: no entry matching {args.find!r} in {args.output}")
            return 1
        for path, entry in hits:
            print(f"{path}\t{entry}")
    return 0


def _byte_count(text: str) -> int:
    """A positive size in bytes, with an optional K, M or G (binary) suffix: 256M."""
    m = re.fullmatch(r"([0-9]+)([KMG]?)", text.strip(), re.I)
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive byte count (such as 65536 or 256M)")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def cmd_sample_engine(args) -> int:
    from rr.corpus.sample import sample_engine
    from rr.io import write_bytes

    data = sample_engine()
    write_bytes(args.output, data)
    print(f"{args.output}: sample engine binary, {len(data)} bytes")
    return 0


def _described(args) -> dict:
    """DESIGN §3's description of args.entry in args.file; UserError if it has no phases."""
    from rr.describe.spec import NothingToDescribe, spec_json

    module, _ = _load(args.file, args.entry)
    f = _function(module, args.entry)
    try:
        return spec_json(f, grouping=args.grouping, module=module)
    except NothingToDescribe as e:
        raise NoPhases(str(e)) from None


def cmd_spec(args) -> int:
    import json

    from rr.describe.spec import spec_table

    spec = _described(args)
    print(json.dumps(spec, indent=2) if args.json else spec_table(spec))
    return 0


def cmd_describe(args) -> int:
    from rr.describe.spec import write_description

    try:
        spec = _described(args)
    except NoPhases as e:
        if not args.record:
            raise
        # for pipelines: a layer without mma is a descriptor without phases, its status the row's
        write_description({"entry": args.entry, "status": "no_phases", "message": str(e), "phases": [],
                           "epilogues": []}, args.output)
        _stderr(f"rr: {e}")
        return 0
    write_description(spec, args.output)
    print(f"{args.output}: {len(spec['phases'])} phases, {len(spec['epilogues'])} epilogues of {spec['entry']}")
    return 0


def cmd_splice(args) -> int:
    from rr.splice.assemble import SpliceError
    from rr.splice.recipe import RecipeError, load_recipe
    from rr.splice.splice import splice

    ptx = _resolve(args.file, args.entry)
    recipe = args.recipe  # a file, or a name (rr.splice.recipe.recipe_path: config/recipes, then rr's own)
    try:
        record = splice(ptx, args.entry, load_recipe(recipe), args.phase, args.output, args.grouping)
    except (RecipeError, SpliceError) as e:
        if not args.record:
            raise UserError(str(e)) from None
        # for pipelines: the refusal is the record, the module an empty file the later stages fail on
        from rr.io import atomic_paths, json_text

        with atomic_paths(args.output, str(args.output) + ".splice.json") as (module, record):
            module.write_text("")
            record.write_text(json_text({"status": getattr(e, "status", "error"), "message": str(e),
                                         "entry": args.entry, "phase": args.phase, "recipe": recipe}))
        refused = "the recipe does not apply" if getattr(e, "status", "") == "not_applicable" else "splice refused"
        _stderr(f"rr: {refused}: {e}")
        return 0
    print(f"{args.output}: phase {record['phase']} by {record['template']}: cut s{record['cut']['first_stmt']}–"
          f"s{record['cut']['last_stmt']}, {len(record['live_in'])} live-in, {len(record['live_out'])} live-out, "
          f"{record['outside_statements_checked']} statements outside unchanged")
    return 0


def cmd_collect(args) -> int:
    from rr.corpus.fnv import fnv1a64_hex
    from rr.io import write_parquet
    from rr.results.collect import collect_cell, launch_frame, read_descriptor

    descriptor = read_descriptor(args.descriptor)
    if args.phase is None and descriptor["phases"]:
        raise UserError(f"--phase is required: {args.descriptor} has phases 1–{len(descriptor['phases'])}")
    module = _resolve(args.module, descriptor["entry"])
    frame = launch_frame(args.launch) if args.launch else None
    table = collect_cell(args.layer, args.phase, args.recipes.split(","), descriptor, args.cell,
                         fnv1a64_hex(read_bytes(module)), frame, args.reference_compile, args.backend)
    write_parquet(args.output, table)
    statuses = ", ".join(f"{r['recipe']}: splice {r['splice_status']}, compile {r['compile_status']}, "
                         f"capture {r['capture_status']}, timing {r['timing_status']}" for r in table.to_pylist())
    print(f"{args.output}: {table.num_rows} rows ({statuses})")
    return 0


class _NoCubin(Exception):
    """A failed compile without --record: its cubin is not written (the report alone says why)."""


def cmd_compile(args) -> int:
    from rr.io import atomic_paths, json_text, write_json
    from rr.run.compile import compile_ptx

    ptx = _resolve(args.ptx, args.entry)
    report = Path(str(args.output) + ".json")
    try:
        # the cubin and its report appear together, the report last (it says what the cubin is);
        # for pipelines (--record) a failed compile's cubin is the empty file it starts as, as a
        # refused splice's module is
        with atomic_paths(args.output, report, inputs=(ptx,)) as (cubin, record):
            result = compile_ptx(ptx, cubin, args.arch)
            if result.status != "ok":
                if not args.record:
                    raise _NoCubin
                cubin.write_bytes(b"")  # emptied of what a failed ptxas left there
            record.write_text(json_text(result.as_dict()))
    except _NoCubin:
        write_json(report, result.as_dict())
    if result.status != "ok":
        _stderr(f"rr: {result.status}: {args.ptx}: {result.message}")
        return 0 if args.record else 1
    for f in result.functions.values():
        regs = f"{f.registers} registers, " if f.registers is not None else ""
        shared = f", {f.shared_bytes} bytes shared" if f.shared_bytes is not None else ""
        print(f"{f.name}: {regs}{f.spill_stores}/{f.spill_loads} bytes spill stores/loads, "
              f"{f.stack_frame} bytes stack{shared}")
    print(f"{args.output}: {args.arch}, ptxas {result.compile_ms:.0f} ms; report {report}")
    return 0


def cmd_run(args) -> int:
    from rr.run.isolate import run_isolated

    if args.reference is not None and not Path(args.reference).is_dir():
        raise UserError(f"{args.reference}: no such capture directory (--reference: a run of the unspliced launch)")
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
    module = _resolve(args.module, read_launch(args.launch).entry)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".rr-run-module-", dir=out.parent) as tmp:
        launch = Path(tmp) / "launch"
        relaunch(args.launch, module, launch)
        record = run_isolated(launch, out, args.backend, args.timeout, args.mma, args.reference)
    return _report_run(args, record)


def _report_run(args, record: dict) -> int:
    """What `rr run` prints of a run's record, and its exit status."""
    if record["status"] != "ok":
        _stderr(f"rr: run {record['status']}: {record['message']}")
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
            _stderr(f"rr: warning: {layer}register {warning} before any write (read as zero)")
    return 0


def cmd_relaunch(args) -> int:
    from rr.run.frame import extract_layer, is_frame, replace_layer
    from rr.run.launch import LaunchError, relaunch, write_launch_error

    try:
        if is_frame(args.launch):
            if not args.layer:
                raise LaunchError(f"{args.launch} is a frame: say which layer's module --module replaces (--layer)")
            if args.extract:
                launch = extract_layer(args.launch, args.layer, args.output, args.module)
                print(f"{args.output}: layer {args.layer} of the frame {args.launch} as a launch of its own"
                      + (f", module {args.module}" if args.module else ""))
                return 0
            if not args.module:
                raise LaunchError("rr relaunch: --module is required, except with --extract")
            frame = replace_layer(args.launch, args.layer, args.module, args.output, args.resume)
            print(f"{args.output}: the frame of {args.launch} ({len(frame.layers)} layers) with layer "
                  f"{args.layer} from {args.module}")
            return 0
        if args.layer or args.resume or args.extract:
            raise LaunchError(f"{args.launch} is one launch, not a frame: --layer, --resume and --extract apply to "
                              "frames")
        if not args.module:
            raise LaunchError("rr relaunch: --module is required")
        launch = relaunch(args.launch, args.module, args.output)
    except LaunchError as e:
        if not args.record:
            raise UserError(str(e)) from None
        write_launch_error(args.output, e.status, str(e))  # the runs of it record why
        _stderr(f"rr: no launch: {e}")
        return 0
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
            from rr.io import write_json

            write_json(args.output, [])
            _stderr(f"rr: nothing compared: {e}")
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
        from rr.io import write_json

        write_json(args.output, dicts)
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
                    Path(args.alone) if args.alone else None, args.backend, args.noise, args.time_limit, args.timeout)
    records = measure(m, Path(args.output), recipe, args.keep, say=lambda line: print(line, flush=True))
    failed = {kind.split(".")[0]: r for kind, r in records.items() if isinstance(r, dict) and r.get("status") != "ok"}
    for kind, r in failed.items():
        _stderr(f"rr: {recipe}: {kind} {r['status']}: {r.get('message', '')}")
    return 0 if args.record or not failed else 1


def cmd_time(args) -> int:
    import json

    from rr.run.isolate import time_isolated

    record = time_isolated(args.launch, args.vs, args.noise, args.time_limit, args.backend)
    if args.output:
        from rr.io import write_json

        write_json(args.output, record)
    if record["status"] != "ok":
        _stderr(f"rr: time {record['status']}: {record['message']}")
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

    module = _resolve(args.module, "cuda_dldn_engine_swin_sample_kernel")
    sample_launch(args.output, module, args.seed)
    print(f"{args.output}: launch of the sample kernel from {module} (seed {args.seed})")
    return 0


def _dims(text: str) -> tuple:
    """`X[,Y[,Z]]`: a grid or block, Y and Z 1 when left out."""
    parts = text.split(",")
    try:
        dims = tuple(int(p) for p in parts) + (1,) * (3 - len(parts))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not X[,Y[,Z]] of positive integers (such as 256 or 16,16,1)")
    return dims


def _named(text: str) -> tuple[str, str]:
    name, eq, value = text.partition("=")
    if not name or not eq or not value:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def _buffer_option(text: str):
    """`NAME=BYTES[:TYPE][:FILL]` → (name, BufferRequest)."""
    from rr.run.launch_template import BUFFER_TYPES, FILLS, BufferRequest

    name, value = _named(text)
    size, *rest = value.split(":")
    types = [r for r in rest if r in BUFFER_TYPES]
    fills = [r for r in rest if r in FILLS]
    if len(types) > 1 or len(fills) > 1 or len(types) + len(fills) != len(rest):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=BYTES[:TYPE][:FILL] (TYPE {', '.join(BUFFER_TYPES)}; "
                                         f"FILL {', '.join(FILLS)})")
    return name, BufferRequest(_byte_count(size), (types or [None])[0], (fills or [None])[0])


def _unique(option: str, items: list[tuple]) -> dict:
    out = {}
    for name, value in items:
        if name in out:
            raise UserError(f"{option} {name}: given twice")
        out[name] = value
    return out


def cmd_launch_template(args) -> int:
    from rr.run.launch_template import write_template

    module, path = _load(args.file, args.entry)
    function = _function(module, args.entry)
    if function.kind != "entry":
        raise UserError(f"{path}: {args.entry} is a .func, not a kernel entry")
    lines = write_template(Path(path), function, module, Path(args.output), args.grid, args.block,
                           _unique("--buffer", args.buffer), _unique("--scalar", args.scalar), args.seed)
    print(f"{args.output}: launch of {args.entry} from {path}, grid {','.join(map(str, args.grid))}, block "
          f"{','.join(map(str, args.block))}, {len(function.params)} parameter{'s' * (len(function.params) != 1)}:")
    print("\n".join(lines))
    return 0


def cmd_summary(args) -> int:
    from rr.io import write_parquet
    from rr.results.report import summary_table

    try:
        table = summary_table(args.cells)
    except ValueError as e:
        raise UserError(str(e)) from None
    write_parquet(args.output, table)
    print(f"{args.output}: {table.num_rows} rows from {len(args.cells)} cells")
    return 0


def cmd_report(args) -> int:
    from rr.results.collect import read_descriptor
    from rr.results.report import read_results, write_report

    descriptors = {}
    for item in args.descriptor:
        layer, _, path = item.partition("=")
        if not path:
            raise UserError(f"--descriptor {item!r}: expected LAYER=PATH")
        descriptors[layer] = read_descriptor(path)
    written = write_report(read_results(args.summary), descriptors, args.output)
    print(f"{args.output}: {', '.join(p.name for p in written)}")
    return 0


def _entry(pattern: str, layer: str) -> str:
    try:
        return pattern.format(layer=layer)
    except (KeyError, IndexError, ValueError):
        raise UserError(f"--entry-pattern {cut(pattern)!r}: expected a name with {{layer}} in it") from None


def _layer_modules(option: str, metavar: str, items: list[str]) -> list[tuple[str, Path]]:
    """(layer, module file) of each `LAYER=PATH` an option was given (rr frame --replace, rr launch
    --module), in order; a malformed one is refused naming the option."""
    out = []
    for item in items:
        layer, _, module = item.partition("=")
        if not layer or not module:
            raise UserError(f"{option} {cut(item)!r}: expected {metavar}")
        out.append((layer, Path(module)))
    return out


def _compiled_modules(args, layers: list[str]) -> dict[str, Path]:
    """--module LAYER=PATH: the module (a layer's cubin) each named layer launches instead of the
    corpus's PTX, checked to be a module rr can load."""
    from rr.run.launch import LaunchError, check_module

    out = {}
    for (layer, path), item in zip(_layer_modules("--module", "LAYER=PATH", args.module), args.module):
        if layer not in layers:
            raise UserError(f"--module {cut(item)!r}: {layer!r} is not a layer of this launch ({', '.join(layers)})")
        try:
            check_module(path)
        except (LaunchError, OSError) as e:
            raise UserError(f"--module {cut(item)!r}: {e}") from None
        out[layer] = path
    return out


def cmd_launch(args) -> int:
    from rr.run.launch import write_launch_error
    from rr.synth.inputs import NoLaunch, layer_launch, parse_extents

    if args.layer == "frame":
        return _launch_frame(args)
    entry = _entry(args.entry_pattern, args.layer)
    module = _compiled_modules(args, [args.layer]).get(args.layer) or _resolve(args.corpus, entry)
    try:
        if args.launches:  # the user's launch of this layer, with the corpus's module (so splices apply)
            from rr.capture.select import user_launch
            from rr.run.launch import relaunch

            source = user_launch(args.launches, args.layer, entry)
            relaunch(source, module, args.output)
            print(f"{args.output}: launch of {entry} from {source}, module {module}")
            return 0
        frame = parse_extents(args.frame, pixels=True)
        layer_launch(args.layer, module, frame, args.output, args.seed)
    except NoLaunch as e:
        if not args.record:
            raise UserError(str(e)) from None
        write_launch_error(args.output, "no_launch", str(e))  # the runs of it record why
        _stderr(f"rr: no launch: {e}")
        return 0
    except ValueError as e:
        raise UserError(str(e)) from None
    print(f"{args.output}: launch of {entry} over a {frame[0]}x{frame[1]} frame (input seed {args.seed})")
    return 0


def _launch_frame(args) -> int:
    """`rr launch frame CORPUS --frame WxH -o DIR`: the synthetic network's frame layout, each
    layer's module taken from the corpus."""
    from rr.run.frame import network_frame, write_frame
    from rr.synth.family import LAYERS
    from rr.synth.inputs import parse_extents
    from rr.synth.network import check_memory, inputs_bytes, network_inputs, network_layout

    try:
        size = parse_extents(args.frame, pixels=True)
        layout = network_layout(size)
        check_memory(layout)
    except ValueError as e:
        raise UserError(str(e)) from None
    compiled = _compiled_modules(args, [spec.name for spec in LAYERS])
    modules = {spec.name: compiled.get(spec.name) or _resolve(args.corpus, _entry(args.entry_pattern, spec.name))
               for spec in LAYERS}
    frame = network_frame(layout, modules)
    try:
        arrays = network_inputs(layout, args.seed)
    except MemoryError:  # what check_memory could not foresee: another process took the memory meanwhile
        raise UserError(f"--frame {args.frame}: out of memory making the frame's buffers "
                        f"({inputs_bytes(layout)[1] / 1e9:.1f} GB)") from None
    write_frame(args.output, frame, arrays, modules, inputs=(args.corpus,))
    print(f"{args.output}: the frame of {len(frame.layers)} layers over {size[0]}x{size[1]} pixels "
          f"(input seed {args.seed}), {len(frame.buffers)} buffers")
    return 0


def cmd_frame(args) -> int:
    """`rr frame LAYOUT --backend B [--replace LAYER=MODULE …] -o OUT`: the whole frame, in one child
    process, with the given layers' modules replaced."""
    from rr.io import scratch_dir
    from rr.run.frame import read_frame, replace_layer
    from rr.run.isolate import run_isolated
    from rr.run.launch import LaunchError

    replacements = _layer_modules("--replace", "LAYER=MODULE", args.replace)
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
    if record["status"] != "ok":
        _stderr(f"rr: frame {record['status']}: {record['message']}")
        return 0 if args.record else 1
    times = ", ".join(f"{lyr['layer']} {next(iter(lyr['times_ms'].values())):.1f}" for lyr in record["layers"])
    print(f"{args.output}: frame {record['frame'][0]}x{record['frame'][1]} on {record['backend']} "
          f"in {record['times_ms']['frame']:.1f} ms ({times} ms)")
    return 0


def cmd_synth(args) -> int:
    from rr.synth.inputs import parse_extents, write_layer

    if args.layer == "engine":
        from rr.io import write_bytes
        from rr.synth.engine import LAYERS, engine_binary

        data = engine_binary(args.arch)
        write_bytes(args.output, data)
        print(f"{args.output}: synthetic engine binary, {len(data)} bytes, layers {', '.join(LAYERS)}")
        return 0

    try:
        extents = parse_extents(args.extents) if args.extents else None
    except ValueError as e:
        raise UserError(str(e)) from None
    out = write_layer(args.output, args.layer, extents, args.arch, args.weight_seed, args.input_seed)
    name = args.layer
    what = f"{name}.ptx, {name}.weights.bin, {name}.json" + (f", launch/ at {args.extents}" if extents else "")
    print(f"{out}: synthetic {name}: {what}")
    return 0


def cmd_capture(args) -> int:
    """`rr capture -o DIR [--kernels REGEX] [--launches RANGE] -- COMMAND [ARGS…]`: the program's
    launches as launch directories (rr.capture); its exit status is the command's."""
    from rr.capture import run_capture

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    result = run_capture(program, args.output, args.kernels, args.launches)
    for note in result.notes:
        print(f"rr capture: {note}", file=sys.stderr)
    if result.output is not None:
        entries = sorted({e["entry"] for e in result.launches})
        print(f"{args.output}: {len(result.launches)} launches captured ({', '.join(entries)}); "
              f"{program[0]} exited with status {result.exit_status}")
    if result.error:  # a program that failed itself keeps its status; else 2, rr's own failure
        print(f"rr: error: {result.error}", file=sys.stderr)
        return result.exit_status or 2
    return result.exit_status


def _grouping_option(s) -> None:
    s.add_argument("--grouping", choices=("run", "gemm"), default="run",
                   help="run: a phase is a maximal run of consecutive mma (the reference numbering); "
                        "gemm: runs joined across statements that only load or compute later mma operands "
                        "(default: %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rr", description="PTX splice experiments on fp8 mma kernels: one subcommand "
                                "per pipeline stage, each runnable alone on the files of the stage before it.",
                                epilog="`rr COMMAND --help` describes a command; docs/design.md the pipeline, "
                                "docs/formats.md every file it writes.")
    p.add_argument("--version", action="version", version=f"rr {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("entries", help="list the entries and functions of a PTX file")
    s.add_argument("file", help="a PTX file")
    s.set_defaults(func=cmd_entries)

    s = sub.add_parser("roundtrip", help="check that parse + emit reproduces a PTX file exactly (exit 0 iff so)")
    s.add_argument("file", help="a PTX file")
    s.set_defaults(func=cmd_roundtrip)

    s = sub.add_parser("linearise", help="write an entry's statements (sNNNN, lines, defs, uses)")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry (or .func) to linearise")
    s.add_argument("-o", "--output", required=True, help="OUT.parquet")
    s.set_defaults(func=cmd_linearise, reads=("file",))

    s = sub.add_parser("extract", help="extract PTX modules from an engine binary or .ptx files")
    s.add_argument("source", help="a binary, a .ptx file or a directory of them")
    s.add_argument("-o", "--output", required=True, help="corpus directory")
    s.add_argument("--find", metavar="PATTERN", help="print the module defining a matching entry")
    s.add_argument("--max-module-bytes", type=_byte_count, metavar="N",
                   help="the largest module read: a decompressed fatbin entry or a text module over "
                        "it is skipped with a warning (default 256M; K, M, G suffixes)")
    s.set_defaults(func=cmd_extract, reads=("source",), writes="dir")

    s = sub.add_parser("spec", help="the phase table of an entry (geometry from the mma chains)")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to describe")
    s.add_argument("--json", action="store_true",
                   help="print the JSON object (docs/formats.md, Descriptions) instead of the table")
    _grouping_option(s)
    s.set_defaults(func=cmd_spec)

    s = sub.add_parser("describe", help="write phases.parquet, epilogues.parquet and descriptor.json")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to describe")
    s.add_argument("-o", "--output", required=True, help="output directory")
    s.add_argument("--record", action="store_true",
                   help="for an entry without mma, write a descriptor without phases (status no_phases) and exit 0")
    _grouping_option(s)
    s.set_defaults(func=cmd_describe, reads=("file",), writes="into")

    s = sub.add_parser("splice", help="apply a recipe to one phase: cut it, splice in the template's code")
    s.add_argument("file", help="a PTX file, or a corpus directory made by `rr extract`")
    s.add_argument("--entry", required=True, help="the kernel entry to splice")
    s.add_argument("--recipe", required=True,
                   help="a recipe YAML file, or a name: config/recipes/NAME.yaml where that exists, else the recipe "
                        "rr ships (isolate, regen, f32acc, probe)")
    s.add_argument("--phase", type=_phase_number, help="the phase to cut (default: the recipe's)")
    _grouping_option(s)
    s.add_argument("-o", "--output", required=True, help="OUT.ptx (and OUT.ptx.splice.json)")
    s.add_argument("--record", action="store_true",
                   help="on refusal write the reason as OUT.ptx.splice.json (and an empty OUT.ptx) and exit 0")
    s.set_defaults(func=cmd_splice, reads=("file", "recipe"))

    s = sub.add_parser("collect", help="one Parquet row per recipe of a layer × phase cell")
    s.add_argument("cell", help="the cell directory holding the recipes' stage records")
    s.add_argument("--layer", required=True, help="the layer's name, as the rows give it")
    s.add_argument("--phase", type=_phase_number, help="the cell's phase (none for a layer without phases)")
    s.add_argument("--recipes", required=True,
                   help="comma-separated recipes (names, resolved as rr splice does, or files): their checks are "
                        "evaluated; records go by the name or the file's stem")
    s.add_argument("--descriptor", required=True, help="the layer's descriptor.json")
    s.add_argument("--module", required=True, help="the layer's PTX file or corpus directory")
    s.add_argument("--launch", help="the layer's launch directory (for the frame size)")
    s.add_argument("--reference-compile", metavar="JSON",
                   help="the unspliced module's compile record (rr compile of the layer's module): the ref_* "
                        "columns and the deltas")
    s.add_argument("--backend", choices=("cuda", "cpu"),
                   help="the backend the captures ran on; cpu: the rows say there is no timing (default: "
                        "timing as the records say)")
    s.add_argument("-o", "--output", required=True, help="OUT.parquet")
    s.set_defaults(func=cmd_collect, reads=("cell", "descriptor", "module", "launch", "reference_compile"))

    s = sub.add_parser("compile", help="compile PTX with ptxas and report registers, spills, stack and shared memory")
    s.add_argument("ptx", help="a PTX file, or a corpus directory made by `rr extract` (with --entry)")
    s.add_argument("--entry", help="in a corpus: compile the module that defines this entry")
    s.add_argument("--arch", default="sm_90", help="the GPU architecture ptxas compiles for (default: %(default)s)")
    s.add_argument("-o", "--output", required=True, help="X.cubin (the report goes to X.cubin.json)")
    s.add_argument("--record", action="store_true",
                   help="exit 0 once the record is written, whatever it says, leaving an empty X.cubin "
                        "when ptxas fails (for pipelines)")
    s.set_defaults(func=cmd_compile, reads=("ptx",))

    s = sub.add_parser("run", help="run a launch description (in a child process) and capture its buffers")
    s.add_argument("launch", help="launch directory (launch.json and .npy buffers)")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cuda (cupy), cpu (rr's PTX interpreter) or auto: cuda when a GPU is present "
                        "(default: %(default)s)")
    s.add_argument("-o", "--output", required=True, help="output directory (same format + run.json)")
    s.add_argument("--timeout", type=_seconds, default=120,
                   help="seconds before the run is killed (default: %(default)s)")
    # rr.numerics.MMA_MODELS and DEFAULT_MMA, named here so that parsing imports no numpy (tested)
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
    s.set_defaults(func=cmd_run, reads=("launch", "reference", "module"), writes="dir")

    s = sub.add_parser("relaunch", help="the same launch with another module (a splice, a cubin)")
    s.add_argument("launch", help="launch directory")
    s.add_argument("--module", help="the PTX or cubin to launch instead")
    s.add_argument("--layer", help="for a frame directory: the layer whose module --module replaces")
    s.add_argument("--extract", action="store_true", help="for a frame: write --layer alone as a launch directory "
                   "(its buffers as LAUNCH holds them; with --module, that module instead)")
    s.add_argument("--resume", metavar="CAPTURE", help="for a frame: a run of LAUNCH (its reference capture); the "
                   "new frame starts at --layer, with what the layers before it wrote taken from CAPTURE")
    s.add_argument("-o", "--output", required=True, help="the new launch directory")
    s.add_argument("--record", action="store_true",
                   help="when LAUNCH cannot be used, write a directory saying why (the runs of it record it) and exit 0")
    s.set_defaults(func=cmd_relaunch, reads=("launch", "module", "resume"), writes="dir")

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
    s.add_argument("--noise", type=_noise, default=0.005,
                   help="relative noise target of each median (default: %(default)s)")
    s.add_argument("--time-limit", type=_seconds, default=30.0,
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
    s.add_argument("--reference", required=True, metavar="CAPTURE", help="the capture of the unspliced LAUNCH")
    s.add_argument("--layer", help="for a frame: the layer the splice replaces")
    s.add_argument("--alone", metavar="LAUNCH", help="for a frame on cuda: the layer alone from the reference "
                   "(rr relaunch CAPTURE --layer L --extract); the splice's layer is also timed against it")
    s.add_argument("--recipe", required=True, help="the recipe's name: the records are OUTPUT/<recipe>.<kind>.json")
    s.add_argument("-o", "--output", required=True, help="the cell's directory, where the records go")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                   help="cuda, cpu (no timing) or auto (default: %(default)s)")
    s.add_argument("--noise", type=_noise, default=0.005, help="the timings' noise target (default: %(default)s)")
    s.add_argument("--time-limit", type=_seconds, default=30.0,
                   help="seconds of sampling at most, each timing (default: %(default)s)")
    s.add_argument("--timeout", type=_seconds, default=3600, help="seconds before the capture is killed "
                   "(default: %(default)s)")
    s.add_argument("--keep", action="store_true", help="keep the splice's launch, capture and layer-alone "
                   "directories beside the records (<recipe>.launch, .capture, .alone.launch)")
    s.add_argument("--record", action="store_true",
                   help="exit 0 once the records are written, whatever they say (for pipelines)")
    s.set_defaults(func=cmd_measure, reads=("launch", "module", "reference", "alone"), writes="into")

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
    s.add_argument("--grid", type=_dims, default=(1, 1, 1), metavar="X,Y,Z", help="blocks (default: 1,1,1)")
    s.add_argument("--block", type=_dims, default=(32, 1, 1), metavar="X,Y,Z",
                   help="threads per block (default: 32,1,1, one warp)")
    s.add_argument("--buffer", type=_buffer_option, action="append", default=[], metavar="NAME=BYTES[:TYPE][:FILL]",
                   help="a pointer's buffer: BYTES (65536, 64K, 1M) of values of TYPE e4m3, f16 or f32 (as "
                        "rr compare reads them; bytes if none), FILL zeros or random (e4m3: any finite value; "
                        "f16, f32: uniform in [-1, 1); bytes: 0-255), by default random where the kernel reads "
                        "the buffer and zeros where it only writes it. Repeatable")
    s.add_argument("--scalar", type=_named, action="append", default=[], metavar="NAME=VALUE",
                   help="a scalar's value: an integer (0x… too; a negative one for a .u32 is its two's complement, "
                        "as nvcc declares every int .u32) or a number. Repeatable")
    s.add_argument("--seed", type=int, default=7, help="seed of the random fills (default: %(default)s)")
    s.set_defaults(func=cmd_launch_template, reads=("file",), writes="dir")

    from rr.synth.family import NAMES as SYNTH_LAYERS

    s = sub.add_parser("synth", help="generate a layer of the synthetic engine (PTX, weights, launch), "
                       "or the engine binary")
    s.add_argument("layer", choices=SYNTH_LAYERS + ("engine",))
    s.add_argument("-o", "--output", required=True, help="output directory (the binary's path for engine)")
    s.add_argument("--extents", help="WIDTHxHEIGHT in the layer's tokens (240x135 for enc2 at a 3840x2160 "
                   "frame): also write DIR/launch/")
    s.add_argument("--arch", default="sm_90", help="the module's .target")
    s.add_argument("--weight-seed", type=int, default=2)
    s.add_argument("--input-seed", type=int, default=7)
    s.set_defaults(func=cmd_synth, writes=lambda a: "file" if a.layer == "engine" else "dir")

    s = sub.add_parser("summary", help="concatenate cells' results into one table")
    s.add_argument("cells", nargs="*", help="results/<layer>_phase<P>.parquet files")
    s.add_argument("-o", "--output", required=True, help="summary.parquet")
    s.set_defaults(func=cmd_summary, reads=("cells",))

    s = sub.add_parser("report", help="the report's figures, tables and first page from a summary")
    s.add_argument("summary", help="results/summary.parquet")
    s.add_argument("--descriptor", action="append", default=[], help="LAYER=descriptor.json (repeatable)")
    s.add_argument("-o", "--output", required=True, help="directory for the PNG figures, HTML and CSV tables and "
                   "run.rst (the report's first page)")
    s.set_defaults(func=cmd_report, reads=("summary",), writes="dir")

    s = sub.add_parser("launch", help="a layer's launch directory over a frame (synthetic engine layers)")
    s.add_argument("layer", help="a layer of the synthetic engine, or `frame`: the whole network's frame layout "
                   "(every layer's launch over shared buffers, for rr frame / rr run)")
    s.add_argument("corpus", help="a corpus directory made by `rr extract`, or the layer's PTX file")
    s.add_argument("--frame", default="3840x2160", help="WIDTHxHEIGHT in pixels")
    s.add_argument("--seed", type=int, default=7, help="input seed")
    s.add_argument("--entry-pattern", default="cuda_dldn_engine_swin_{layer}_kernel")
    s.add_argument("--launches", metavar="DIR", help="the layer's launch from DIR/<layer>/, or from the capture DIR "
                   "(rr capture) by entry name, instead of the synthetic engine's; its module replaced by the corpus's")
    s.add_argument("--module", action="append", default=[], metavar="LAYER=PATH",
                   help="launch LAYER with this module instead of the corpus's PTX: its cubin (rr compile), so that "
                        "the GPU runs what ptxas reported and loads it without the driver compiling the PTX; "
                        "repeatable")
    s.add_argument("--record", action="store_true",
                   help="for a layer rr has no launch for, write a directory saying so (status no_launch) and exit 0")
    s.add_argument("-o", "--output", required=True)
    s.set_defaults(func=cmd_launch, reads=("corpus", "launches"), writes="dir")

    s = sub.add_parser("frame", help="run a whole frame (every layer in order on shared buffers), optionally "
                       "with layers' modules replaced", description=cmd_frame.__doc__.split("\n")[0])
    s.add_argument("layout", help="a frame directory (rr launch frame CORPUS --frame WxH -o DIR)")
    s.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto", help="default: %(default)s")
    s.add_argument("--replace", action="append", default=[], metavar="LAYER=MODULE",
                   help="run LAYER with this module (a splice, a cubin) instead; repeatable")
    s.add_argument("--timeout", type=_seconds, default=600, help="seconds before the run is killed "
                   "(default: %(default)s)")
    s.add_argument("-o", "--output", required=True, help="output directory: the frame with every buffer after it")
    s.add_argument("--record", action="store_true", help="exit 0 once the run's record is written (for pipelines)")
    s.set_defaults(func=cmd_frame, reads=("layout",), writes="dir")

    s = sub.add_parser("capture", help="run a CUDA program and capture its kernel launches as launch directories",
                       description=cmd_capture.__doc__.split("\n")[0])
    s.add_argument("-o", "--output", required=True, help="the capture directory (capture.json, modules/, launches/)")
    s.add_argument("--kernels", metavar="REGEX", help="capture only launches of entries this POSIX extended regular "
                   "expression finds a match in")
    s.add_argument("--launches", metavar="RANGE", help="of the matching launches, only these: N, A:B, A:, :B, "
                   "comma-separated, 0 the first")
    s.add_argument("program", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS…]")
    s.set_defaults(func=cmd_capture, writes="dir")

    s = sub.add_parser("sample-engine", help="write a small engine-style binary (bundled sample PTX)")
    s.add_argument("-o", "--output", required=True, help="engine binary to write")
    s.set_defaults(func=cmd_sample_engine)
    for choice in sub._choices_actions:  # `rr COMMAND --help` opens with the line `rr --help` lists
        sub.choices[choice.dest].description = sub.choices[choice.dest].description or f"{choice.help}."
    return p


def _check_output(args) -> None:
    """Refuse, before any work, an output that would destroy data (rr.io.check_output): what a
    command reads (its `reads` arguments) and how it writes `-o` (`writes`: a file, a directory it
    writes whole, or a directory it writes named files into) are declared with its parser."""
    from rr.io import check_output

    if getattr(args, "output", None) is None:
        return
    writes = getattr(args, "writes", "file")
    kind = writes(args) if callable(writes) else writes
    inputs = []
    for name in getattr(args, "reads", ()):
        value = getattr(args, name, None)
        inputs += value if isinstance(value, list) else [value]
    check_output(args.output, inputs, kind)


def _message(e: BaseException | str) -> str:
    """The error's text, each line's control characters escaped (an input's ESC or BEL echoed in a
    message stays off the terminal) and each line cut (a 200 MB bad line is not echoed whole)."""
    lines = str(e).splitlines() or [""]
    return "\n".join(cut(printable(line), 800) for line in lines[:50])


def _stderr(text: str) -> None:
    """A note or refusal on stderr, as _message writes a message: control characters escaped, cut."""
    print(_message(text), file=sys.stderr)


def _os_error(e: OSError) -> str:
    """`PATH: reason` of an operating-system error."""
    reason = e.strerror or str(e)
    return f"{e.filename}: {reason}" if e.filename is not None else reason


def main(argv: list[str] | None = None) -> int:
    """The command: its exit status. SIGTERM, SIGHUP and SIGINT (Ctrl-C) end the processes it
    started and then the command itself, its temporaries removed, with 128 + the signal and no
    traceback (rr.children)."""
    from rr.children import ending_children_on_signals

    with ending_children_on_signals():
        try:
            return _main(argv)
        except KeyboardInterrupt as e:  # rr.children.Interrupted, or a Ctrl-C before its handler
            return getattr(e, "status", 130)  # 128 + SIGINT


def _main(argv: list[str] | None) -> int:
    from rr.io import OutputRefused
    from rr.ptx.errors import ParseError
    from rr.validation import InvalidInput

    args = build_parser().parse_args(argv)
    try:
        _check_output(args)
        return args.func(args)
    except NoPhases as e:
        _stderr(f"rr: {e}")
        return 1
    except (UserError, ParseError, InvalidInput, OutputRefused) as e:
        _stderr(f"rr: error: {e}")
        return 2
    except BrokenPipeError:
        # the reader went away (`rr spec --json | head`): end quietly, as a unix tool killed by
        # SIGPIPE does, and keep the interpreter's last flush of stdout from failing again
        import os
        import signal

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as e:  # ENOSPC, EROFS, EACCES, ENOTDIR, EISDIR, …
        _stderr(f"rr: error: {_os_error(e)}")
        return 2


# The commands whose code (rr.ptx, rr.describe, rr.corpus's extraction, rr.io) uses no numpy:
# pyarrow, which they write Parquet with, imports it when it can (0.1–0.14 s of each command).
_NUMPY_FREE = (["spec"], ["describe"], ["linearise"], ["extract"], ["entries"], ["roundtrip"])


def entry() -> int:
    """The `rr` command (console script, `python -m rr`): main() in a process of its own. pyarrow
    imports pandas — 0.5–1 s, half of a small command's time — the first time it builds an array
    whenever pandas is installed (rr's own `report` needs it), to ask whether the data is a
    pandas object. No rr command but `report` gives pyarrow pandas objects or uses pandas, so for
    the others the process says pandas is absent. Likewise numpy for the commands that use none
    (_NUMPY_FREE), which pyarrow imports when it can (0.1 s, an eighth of `rr spec`'s time on the
    widest layer, a tenth of `rr linearise` on a large kernel). (Not in main(): tests call that
    in-process.)"""
    for stream in (sys.stdout, sys.stderr):
        # what the stream's encoding cannot say — a character past ASCII under PYTHONIOENCODING=ascii,
        # a file name that is not UTF-8 (its bytes are surrogates in argv) — is written as an escape
        stream.reconfigure(errors="backslashreplace")
    argv = sys.argv[1:]
    absent = tuple(name for name, unused in (("pandas", argv[:1] != ["report"]), ("numpy", argv[:1] in _NUMPY_FREE))
                   if unused and name not in sys.modules)
    if absent:
        sys.meta_path.insert(0, _Without(absent))
    status = main(argv)
    # The process ends here: the objects left (an analysis's cyclic garbage, the caches) are
    # handed to the operating system whole instead of being collected and freed one by one at
    # exit, 0.06 s of `rr spec` on the widest layer. Output files are closed by then; stdout and
    # stderr are flushed by the interpreter as ever.
    import gc

    gc.freeze()
    return status


class _Without:
    """A meta path finder for which the named packages are not installed (pyarrow takes the
    ImportError as that). Not `sys.modules["pandas"] = None`: Cython's import finds that None
    and uses it."""

    def __init__(self, names: tuple):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (not used by this rr command)", name=name)
        return None


if __name__ == "__main__":
    sys.exit(entry())
