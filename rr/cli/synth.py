"""The synthetic engine's command: `rr synth` — a layer, or the engine binary (the workflow's synth
stage)."""

from __future__ import annotations


from rr.cli.common import UserError


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


def add_parsers(sub) -> None:
    from rr.synth.family import NAMES as SYNTH_LAYERS

    s = sub.add_parser("synth", help="generate a layer of the synthetic engine (PTX, weights, launch), "
                       "or the engine binary")
    s.add_argument("layer", choices=SYNTH_LAYERS + ("engine",),
                   help="a layer of the synthetic network (docs/engine.md), or `engine`: the binary of all of them "
                        "and the sample kernel, as a real engine bundles its modules (the default corpus)")
    s.add_argument("-o", "--output", required=True, help="output directory (the binary's path for engine)")
    s.add_argument("--extents", help="WIDTHxHEIGHT in the layer's tokens (240x135 for enc2 at a 3840x2160 "
                   "frame): also write DIR/launch/")
    s.add_argument("--arch", default="sm_90", help="the modules' .target (default: %(default)s)")
    s.add_argument("--weight-seed", type=int, default=2,
                   help="seed of the layer's weight image (default: %(default)s)")
    s.add_argument("--input-seed", type=int, default=7,
                   help="seed of the launch's input image and texture, with --extents (default: %(default)s)")
    s.set_defaults(func=cmd_synth, writes=lambda a: "file" if a.layer == "engine" else "dir")
