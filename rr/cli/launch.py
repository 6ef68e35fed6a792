"""The launch command: a layer's launch directory over a frame, or the synthetic network's frame
layout (the workflow's launch stage)."""

from __future__ import annotations

from pathlib import Path

from rr.cli.common import UserError, layer_modules, recorded, resolve_ptx
from rr.validation import cut


DEFAULT_PATTERN = "cuda_dldn_engine_swin_{layer}_kernel"  # the synthetic engine's (and the real one's) entries


def _entry(pattern: str | None, layer: str) -> str:
    pattern = DEFAULT_PATTERN if pattern is None else pattern
    try:
        return pattern.format(layer=layer)
    except (KeyError, IndexError, ValueError):
        raise UserError(f"--entry-pattern {cut(pattern)!r}: expected a name with {{layer}} in it") from None


def _compiled_modules(args, layers: list[str]) -> dict[str, Path]:
    """--module LAYER=PATH: the module (a layer's cubin) each named layer launches instead of the
    corpus's PTX, checked to be a module rr can load."""
    from rr.run.launch import LaunchError, check_module

    out = {}
    for (layer, path), item in zip(layer_modules("--module", "LAYER=PATH", args.module), args.module):
        if layer not in layers:
            raise UserError(f"--module {cut(item)!r}: {layer!r} is not a layer of this launch ({', '.join(layers)})")
        try:
            check_module(path)
        except LaunchError as e:  # an empty cubin (a failed compile's) keeps its status, no_module
            raise LaunchError(f"--module {cut(item)!r}: {e}", e.status) from None
        except OSError as e:
            raise UserError(f"--module {cut(item)!r}: {e}") from None
        out[layer] = path
    return out


def cmd_launch(args) -> int:
    from rr.run.launch import LaunchError, write_launch_error
    from rr.synth.inputs import NoLaunch, layer_launch, parse_extents

    if args.layer == "frame":
        return _launch_frame(args)
    entry, why = _layer_entry(args)
    try:
        module = _compiled_modules(args, [args.layer]).get(args.layer)
    except LaunchError as e:  # the layer's module did not compile: with --record its captures say so, as rows
        return recorded(args, e, lambda _, error=e: write_launch_error(args.output, error), "no launch")
    module = module or resolve_ptx(args.corpus, entry)
    try:
        if args.launches:  # the user's launch of this layer, with the corpus's module (so splices apply)
            from rr.capture.select import user_launch
            from rr.run.launch import relaunch

            source = user_launch(args.launches, args.layer, entry)
            relaunch(source, module, args.output)
            print(f"{args.output}: launch of {entry}{why} from {source}, module {module}")
            return 0
        frame = parse_extents(args.frame, pixels=True)
        layer_launch(args.layer, module, frame, args.output, args.seed)
    except NoLaunch as e:  # with --record, the runs of the directory record why
        return recorded(args, e, lambda _, error=e: write_launch_error(args.output, error), "no launch")
    except ValueError as e:
        raise UserError(str(e)) from None
    print(f"{args.output}: launch of {entry} over a {frame[0]}x{frame[1]} frame (input seed {args.seed})")
    return 0


def _layer_entry(args) -> tuple[str, str]:
    """The layer's entry, and how it was found where no --entry-pattern named it: a user's launch
    directory names its own entry, which is the one launched — not the synthetic engine's name."""
    if args.entry_pattern is None and args.launches:
        from rr.capture.select import launch_entry
        from rr.run.launch import LaunchError

        try:
            named = launch_entry(args.launches, args.layer)
        except LaunchError as e:
            raise UserError(str(e)) from None
        if named is not None:
            return named, f" (the entry of the launch in {args.launches}: no --entry-pattern given)"
    return _entry(args.entry_pattern, args.layer), ""


def _launch_frame(args) -> int:
    """`rr launch frame CORPUS --frame WxH -o DIR`: the synthetic network's frame layout, each
    layer's module taken from the corpus."""
    from rr.run.frame import network_frame, write_frame
    from rr.run.launch import LaunchError
    from rr.synth.family import LAYERS
    from rr.synth.inputs import parse_extents
    from rr.synth.network import check_memory, inputs_bytes, network_inputs, network_layout

    try:
        size = parse_extents(args.frame, pixels=True)
        layout = network_layout(size)
        check_memory(layout)
    except ValueError as e:
        raise UserError(str(e)) from None
    try:
        compiled = _compiled_modules(args, [spec.name for spec in LAYERS])
    except LaunchError as e:
        raise UserError(str(e)) from None
    modules = {spec.name: compiled.get(spec.name) or resolve_ptx(args.corpus, _entry(args.entry_pattern, spec.name))
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


def add_parsers(sub) -> None:
    s = sub.add_parser("launch", help="a layer's launch directory over a frame (synthetic engine layers)")
    s.add_argument("layer", help="a layer of the synthetic engine, or `frame`: the whole network's frame layout "
                   "(every layer's launch over shared buffers, for rr frame / rr run)")
    s.add_argument("corpus", help="a corpus directory made by `rr extract`, or the layer's PTX file")
    s.add_argument("--frame", default="3840x2160", help="WIDTHxHEIGHT in pixels the launch covers (default: "
                   "%(default)s)")
    s.add_argument("--seed", type=int, default=7, help="seed of the input image and texture (default: %(default)s)")
    s.add_argument("--entry-pattern",
                   help="the layer's kernel entry in the corpus, {layer} replaced by LAYER (the config's "
                        "corpus.entry_pattern; default: the entry a --launches DIR names for the layer, else "
                        f"{DEFAULT_PATTERN})")
    s.add_argument("--launches", metavar="DIR", help="the layer's launch from DIR/<layer>/, or from the capture DIR "
                   "(rr capture) by entry name, instead of the synthetic engine's; its module replaced by the corpus's")
    s.add_argument("--module", action="append", default=[], metavar="LAYER=PATH",
                   help="launch LAYER with this module instead of the corpus's PTX: its cubin (rr compile), so that "
                        "the GPU runs what ptxas reported and loads it without the driver compiling the PTX; "
                        "repeatable")
    s.add_argument("--record", action="store_true",
                   help="for a layer rr has no launch for, write a directory saying so (status no_launch) and exit 0")
    s.add_argument("-o", "--output", required=True, help="the launch directory (or frame layout) to write")
    s.set_defaults(func=cmd_launch, reads=("corpus", "launches"), writes="dir")
