"""One validation layer for the files rr reads as structured input (recipes, the workflow config,
launch descriptions, stage records): bounded reading, YAML whose aliases may not expand past a
bound, JSON errors with line and column, and JSON Schema errors that name the key and the value,
with every echoed value cut to a few hundred characters."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import functools

MAX_YAML_BYTES = 1 << 20  # a recipe or config file; theirs are a few hundred bytes
MAX_JSON_BYTES = 256 << 20  # a launch description, descriptor or stage record
MAX_VALUES = 100_000  # values (scalars, lists, maps) a YAML document may expand to through aliases
CUT = 300  # characters of an echoed value in a message
MAX_ERRORS = 20  # schema errors reported of one file


class InvalidInput(ValueError):
    """An input file rr cannot use; the message names it (`PATH[:LINE:COL]: reason`)."""


def cut(text: str, limit: int = CUT) -> str:
    """`text` whole if short, else its start and end around a note of how much was left out, so an
    echoed value stays readable and a message's reason (at its end) survives."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]}…[{len(text) - head - tail} characters cut]…{text[-tail:]}"


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1


def printable(text: str) -> str:
    """`text` with its control characters (ESC, BEL, CR, backspace, … — all of C0 but tab and
    newline, DEL and C1) written as `\\xNN`: an input line echoed in a message cannot move the
    cursor, recolour or retitle the terminal, or ring it."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _open_nonblocking(path, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)


def open_regular(path: str | Path, error=InvalidInput):
    """A regular file opened for reading (a binary file object): a directory is IsADirectoryError,
    anything else — a FIFO, a device, a socket — `error` naming it. The open does not block and the
    check is of what was opened (fstat), so a FIFO, there from the start or swapped in after a
    stat, can neither hang the read nor pass for a file; /dev/zero would never end. OSError from
    the open (no such file, permission, a loop of links) names the path."""
    f = open(path, "rb", opener=_open_nonblocking)  # a directory: IsADirectoryError, from open itself
    try:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise error(f"{path}: not a regular file")
        os.set_blocking(f.fileno(), True)
        return f
    except BaseException:
        f.close()
        raise


def read_bytes(path: str | Path, limit: int | None = None, error=InvalidInput) -> bytes:
    """A regular file's bytes (`open_regular`), refused with `error` when over `limit` bytes."""
    with open_regular(path, error) as f:
        size = os.fstat(f.fileno()).st_size
        if limit is not None and size > limit:
            raise error(f"{path}: {size} bytes, more than the {limit} rr reads of such a file")
        return f.read() if limit is None else f.read(limit + 1)


def read_text(path: str | Path, limit: int = MAX_YAML_BYTES) -> str:
    """A regular file's text: a directory, FIFO or device, a file over `limit` bytes or one that is
    not UTF-8 is refused by name (`read_bytes`)."""
    data = read_bytes(path, limit)  # FileNotFoundError, PermissionError: the caller's OSError handler names the path
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise InvalidInput(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None


def expanded_size(root, children, limit: int = MAX_VALUES) -> int:
    """How many values `root` stands for once every shared reference is written out, counted with
    one visit per distinct object (so a billion-laughs document costs its own size, not its
    expansion); `limit + 1` as soon as the count passes `limit`, or for a document that contains
    itself. Iterative: no recursion proportional to the nesting depth."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children(node)))
            continue
        if key in sizes:
            continue
        if key in open_:
            return limit + 1  # a cycle: infinite expansion
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _node_children(node) -> list:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def value_children(value) -> list:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return []


def load_yaml(path: str | Path, limit: int = MAX_VALUES):
    """A YAML file through the safe loader, refused if its aliases expand past `limit` values (the
    check runs on the node graph, before anything walks the expansion)."""
    import yaml  # here, not at start-up: most commands read no YAML

    text = read_text(path)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if expanded_size(node, _node_children, limit) > limit:
            raise InvalidInput(f"{path}: the document expands to more than {limit} values through YAML aliases "
                               f"(an alias bomb?); refused")
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise InvalidInput(f"{where}: not valid YAML: {cut(str(getattr(e, 'problem', None) or e))}") from None
    except RecursionError:
        raise InvalidInput(f"{path}: nested too deeply to read") from None
    finally:
        loader.dispose()


def check_expansion(value, where: str, limit: int = MAX_VALUES) -> None:
    """The same bound on an already-loaded document (the workflow's config as Snakemake read it)."""
    if expanded_size(value, value_children, limit) > limit:
        raise InvalidInput(f"{where}: expands to more than {limit} values (YAML aliases?); refused")


def read_json(path: str | Path, limit: int = MAX_JSON_BYTES):
    """A JSON file; a syntax error is `PATH:LINE:COL: not valid JSON: reason`."""
    text = read_text(path, limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise InvalidInput(f"{path}: nested too deeply to read") from None


@functools.cache
def _validator_class():
    """Draft 2020-12 with strict integers: JSON Schema's "integer" admits 8.0, and a phase, an
    offset or a block size of 8.0 is a mistake. (jsonschema is imported on first use: it costs
    a tenth of a second, and most commands validate nothing.)"""
    import jsonschema

    types = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda checker, v: isinstance(v, int) and not isinstance(v, bool))
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=types)


@functools.cache
def _registry():
    """rr's shipped JSON schemas by file name, for a `$ref` from one to another
    (`launch.schema.json#/$defs/name`): loaded and crawled once (retrieved at each reference, they
    made the validation of a network's frame.json three times slower)."""
    from importlib import resources

    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    names = [f.name for f in resources.files("rr.data").iterdir() if f.name.endswith(".schema.json")]
    return Registry().with_resources((name, DRAFT202012.create_resource(schema(name))) for name in names).crawl()


@functools.cache
def schema(name: str) -> dict:
    """A schema shipped in rr/data (YAML or JSON), read once per process (a frame's every layer
    validates its launch against it: read each time, by the YAML parser, it was a third of
    `rr compare` on two frames). Callers do not change it."""
    from importlib import resources  # 15 ms, for the commands that validate

    text = resources.files("rr.data").joinpath(name).read_text(encoding="utf-8")
    if name.endswith(".json"):
        return json.loads(text)  # the same document as YAML reads it, 200 times sooner
    import yaml

    return yaml.safe_load(text)


def key_path(parts) -> str:
    """`fields[3].offset` for the path ['fields', 3, 'offset']."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def schema_errors(instance, schema_: dict, where: str) -> list[str]:
    """`WHERE: KEY: message` for each way `instance` breaks `schema_` (at most MAX_ERRORS), the
    value in each message cut."""
    errors = sorted(_validator_class()(schema_, registry=_registry()).iter_errors(instance),
                    key=lambda e: [str(p) for p in e.absolute_path])
    lines = []
    for e in errors[:MAX_ERRORS]:
        message = e.message
        if len(message) > CUT:
            shown = repr(e.instance)
            message = message.replace(shown, cut(shown), 1) if shown in message else message
        lines.append(f"{where}: {key_path(e.absolute_path)}: {cut(message, 2 * CUT)}")
    if len(errors) > MAX_ERRORS:
        lines.append(f"{where}: … and {len(errors) - MAX_ERRORS} more")
    return lines


def validate(instance, schema_: dict, where: str, error=InvalidInput) -> None:
    lines = schema_errors(instance, schema_, where)
    if lines:
        raise error("\n".join(lines))


def validate_against(instance, name: str, where: str, error=InvalidInput) -> None:
    """`validate` against the shipped schema `name`, remembering which documents passed: a frame's
    every read validates its layers' launch descriptions, which are the same from one splice's frame
    to the next (1.8 ms each, 20 ms a frame.json of the network, several reads a job)."""
    if not _valid(name, json.dumps(instance, sort_keys=True)):
        validate(instance, schema(name), where, error)


@functools.lru_cache(maxsize=4096)
def _valid(name: str, text: str) -> bool:
    """Whether the JSON `text` is valid against the shipped schema `name` (a pure function of the
    two: the schemas are files of rr's own)."""
    return next(_validator_class()(schema(name), registry=_registry()).iter_errors(json.loads(text)), None) is None


YTE_KEY = "__use_yte__"


def checked_config_file(path: str | Path, extra=()) -> str:
    """The workflow's config file (and any given with --configfile), refused before Snakemake
    reads it if it expands past the alias bound, is not a mapping, or turns on YTE templating
    (`__use_yte__`: Snakemake would evaluate its `?` expressions as Python). Returns `path`."""
    for p in (path, *extra):
        if p == path and extra and not Path(p).exists():
            continue  # Snakemake allows the workflow's own file to be absent when --configfile names others
        raw = load_yaml(p)
        if not isinstance(raw, dict):
            raise InvalidInput(f"{p}: a config file is a mapping of keys at its top level")
        if YTE_KEY in raw:
            raise InvalidInput(f"{p}: {YTE_KEY}: YTE templating is refused: a config file is data, and "
                               f"Snakemake would run its ?-expressions as Python code")
    return str(path)


# C0 controls and DEL: a newline would split a job's command (and lets `^…$` patterns match
# "sm_90\n", since `$` matches before a final newline); none belongs in a name, path or size
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _strings(value, path=()):
    """(key path, string) of every string in a loaded document, keys included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k, path)
            yield from _strings(v, (*path, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))


def checked_config(config: dict, where: str = "config") -> dict:
    """The config as Snakemake merged it (files, --config), bounded before validation walks it,
    and refused where a string holds a control character (naming the key)."""
    check_expansion(config, where)
    for path, text in _strings(config):
        bad = CONTROL.search(text)
        if bad:
            raise InvalidInput(f"{where}: {key_path(path)}: {cut(repr(text))}: a control character "
                               f"({bad.group()!r}) has no place in a config value")
    return config
