"""What the interposer wrote for one launch (`record.json`, `params.bin`, the buffer copies) as an rr
launch description: the parameter block as fields — every parameter word that held a device
pointer a `buffer` field (at its offset into the allocation), a texture or surface object a
`texture`/`surface` field, the other bytes scalars exactly as captured — and the buffers with their
roles (a buffer the launch changed is `inout`). A launch rr cannot replay faithfully still has its
copies; its description is a status and the reason (`unsupported`), never a launch that would
replay something else. Pure: the files are moved by rr.capture.session."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rr.records import Status
from rr.run.launch import Buffer, Field, Launch

MAX_VALUES = 4096  # values in one scalar field (launch.schema.json)
HALF, CLAMP, POINT, NORMALIZED = 0x10, 1, 0, 0x02  # CU_AD_FORMAT_HALF, CU_TR_ADDRESS_MODE_CLAMP, …


@dataclass(frozen=True)
class Described:
    """One captured launch: its description (None when it cannot be replayed: `status` and
    `message` say why), the raw copy files → launch file names, and what capture.json says of it."""
    launch: Launch | None
    files: dict  # raw file name (b0.npy, a1.npy) -> launch buffer file name
    status: Status = Status.OK
    message: str = ""
    warnings: tuple = ()
    buffers: tuple = field(default_factory=tuple)  # capture.json's view of each buffer


def scalar_fields(data: bytes, offset: int) -> list[Field]:
    """Bytes as scalar fields from `offset` (8-byte aligned): uint32 words, then a uint16 and a
    uint8 for a tail, each field at most MAX_VALUES values and aligned to its element size."""
    out, at, end = [], 0, len(data)
    for dtype, width in (("uint32", 4), ("uint16", 2), ("uint8", 1)):
        count = (end - at) // width
        while count:
            n = min(count, MAX_VALUES)
            values = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"), count=n, offset=at)
            out.append(Field("scalar", offset + at, dtype, tuple(int(v) for v in values)))
            at += n * width
            count -= n
    return out


def _param_field(data: bytes, offset: int) -> Field:
    """One kernel parameter of a list as one scalar field: the widest unsigned type dividing it."""
    for dtype, width in (("uint64", 8), ("uint32", 4), ("uint16", 2), ("uint8", 1)):
        if len(data) % width == 0 and len(data) // width <= MAX_VALUES:
            values = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"))
            return Field("scalar", offset, dtype, tuple(int(v) for v in values))
    raise ValueError(f"a {len(data)}-byte parameter")


def _names(record: dict) -> tuple[dict, dict]:
    """Buffer names from where the parameters refer to them: p<offset> for memory, tex<offset> /
    surf<offset> for an array (by the first word that refers to it)."""
    buffers, arrays = {}, {}
    for ref in record["refs"]:
        if ref["kind"] == "buffer":
            buffers.setdefault(ref["index"], f"p{ref['offset']}")
        elif ref["kind"] in ("texture", "surface"):
            arrays.setdefault(ref["index"], f"{'tex' if ref['kind'] == 'texture' else 'surf'}{ref['offset']}")
    return buffers, arrays


def describe(record: dict, params: bytes) -> Described:
    """The launch description of a captured launch (record.json and params.bin of it)."""
    bnames, anames = _names(record)
    files = {record["buffers"][i]["file"]: f"{n}.npy" for i, n in bnames.items()}
    files.update({record["arrays"][i]["file"]: f"{n}.npy" for i, n in anames.items() if record["arrays"][i]["file"]})
    views, warnings = [], []
    for i, name in bnames.items():
        b = record["buffers"][i]
        views.append({"name": name, "kind": "buffer", "base": b["base"], "bytes": b["size"], "found_by": b["found_by"],
                      "changed": b["changed"],
                      "refs": [{"offset": r["offset"], "at": r["value"] - b["base"]} for r in record["refs"]
                               if r["kind"] == "buffer" and r["index"] == i]})
    for i, name in anames.items():
        a = record["arrays"][i]
        views.append({"name": name, "kind": "array", "width": a["width"], "height": a["height"], "depth": a["depth"],
                      "format": a["format"], "channels": a["channels"], "changed": a["changed"],
                      "refs": [{"offset": r["offset"], "kind": r["kind"]} for r in record["refs"]
                               if r["kind"] in ("texture", "surface") and r["index"] == i]})

    def refuse(message: str) -> Described:
        return Described(None, files, Status.UNSUPPORTED, message, tuple(warnings), tuple(views))

    if record["module"] is None:
        return refuse(f"the module of {record['entry']} was not seen loaded (loaded before the interposer, or through "
                      "a call it does not hook)")
    if record["problem"]:
        return refuse(record["problem"])
    for r in record["refs"]:
        if r["kind"] == "object":
            return refuse(f"the texture or surface object at parameter offset {r['offset']} does not resolve to a CUDA "
                          "array (linear, pitch-2D or mipmapped resources are not replayed)")
    for i, name in anames.items():
        a = record["arrays"][i]
        if not (a["file"] and a["format"] == HALF and a["channels"] == 4 and a["height"] and not a["depth"]):
            return refuse(f"{name} is a {a['width']}x{a['height']}x{a['depth']} array of {a['channels']} channels of "
                          f"format 0x{a['format']:x}; rr replays 2D RGBA16F images only (4 channels of "
                          "CU_AD_FORMAT_HALF)")
    for s in record["samplers"]:
        if s["filter_mode"] != POINT or s["flags"] & NORMALIZED or any(m != CLAMP for m in s["address_mode"][:2]):
            warnings.append(f"the texture at parameter offset {s['offset']} samples with filter mode {s['filter_mode']}, "
                            f"address modes {s['address_mode'][:2]}, flags 0x{s['flags']:x}; a replay samples with point "
                            "filtering, clamp addressing and unnormalised coordinates")
    if record["launch_attributes"]:
        warnings.append(f"launched with attributes {record['launch_attributes']} (cuLaunchKernelEx); a replay "
                        "launches without them")

    handles = {}
    for r in record["refs"]:
        if r["kind"] == "buffer":
            handles[r["offset"]] = Field("buffer", r["offset"], buffer=bnames[r["index"]],
                                         at=r["value"] - record["buffers"][r["index"]]["base"])
        else:
            handles[r["offset"]] = Field(r["kind"], r["offset"], buffer=anames[r["index"]])
    size, layout_params = record["params_size"], record["params"]
    fields: list[Field] = []
    if len(layout_params) <= 1:  # one parameter (the engine's block), or the `extra` buffer alone
        layout, start = "block", 0
        for offset in sorted(handles) + [size]:
            fields += scalar_fields(params[start:offset], start)
            if offset < size:
                fields.append(handles[offset])
            start = offset + 8
    else:  # one field per kernel parameter
        layout = "list"
        for k, (offset, length) in enumerate(layout_params):
            inside = [o for o in handles if offset <= o < offset + length]
            if inside == [offset] and length == 8:
                fields.append(handles[offset])
            elif inside:
                return refuse(f"parameter {k} ({length} bytes at offset {offset}) holds a pointer or object at offset "
                              f"{inside[0]}: rr replays handles inside a parameter only for a kernel of one parameter")
            else:
                fields.append(_param_field(params[offset:offset + length], offset))
    buffers = {}
    for i, name in bnames.items():
        buffers[name] = Buffer(name, f"{name}.npy", "inout" if record["buffers"][i]["changed"] else "in")
    for i, name in anames.items():
        buffers[name] = Buffer(name, f"{name}.npy", "inout" if record["arrays"][i]["changed"] else "in",
                               "rgba16f", "float16")
    launch = Launch(record["entry"], record["module"], tuple(record["grid"]), tuple(record["block"]), tuple(fields),
                    buffers, record["shared_bytes"], layout, size if layout == "block" else 0)
    return Described(launch, files, Status.OK, "", tuple(warnings), tuple(views))
