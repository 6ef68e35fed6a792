# Helpers shared by the rules: config lookups, so that no rule holds logic of its own.


import os
import re
import sys
from pathlib import Path

from rr.layers import LAYER_NAME, RESERVED_LAYERS
from rr.records import COMPARE, COMPILE, DESCRIPTOR, LAYER_TIMING, RUN, SPLICE, TIMING, read_record
from rr.run.gpus import resolve_backend
from rr.splice.recipe import recipe_path
from rr.synth.engine import LAYERS as ENGINE_LAYERS
from rr.synth.family import LAYERS as NETWORK

# The synthetic engine's entries are named as the real engine's; a corpus of one's own, unless the
# config says how, is named by its kernels: each entry a layer, called as the entry is.
if config["corpus"]["entry_pattern"] is None:
    config["corpus"]["entry_pattern"] = (
        "cuda_dldn_engine_swin_{layer}_kernel" if config["corpus"]["source"] is None else "{layer}")

# auto resolved once, at DAG time: it decides the frame size the launches are made for.
BACKEND = resolve_backend(config["backend"])
FRAME = config["frame"] if BACKEND == "cuda" else config["cpu_frame"]
# What a capture or timing job takes of the `gpu` resource (its limit: profiles/default).
GPU = 1 if BACKEND == "cuda" else 0
# ...and of --cores: on cuda none — such a job mostly waits for its GPU claim and the worker, and a
# core held by waiting jobs is one ptxas cannot have (a 4K sweep's measure jobs held 4.4 of 16
# cores, ptxas got 9); on the cpu backend its run is the interpreter, a core's work.
GPU_JOB_THREADS = 0 if BACKEND == "cuda" else 1
# cuda jobs hand their device work to the GPU's long-lived worker (rr.run.worker): the jobs' shells
# inherit this process's environment (and cluster jobs get it: the envvars directive, Snakefile)
WORKER = "1" if BACKEND == "cuda" and config["gpu_worker"] else "0"
os.environ["RR_WORKER"] = WORKER


def reporting():
    """Whether this is `snakemake --report …` (which Snakemake says only after reading the Snakefile)."""
    return any(a == "--report" or a.startswith("--report=") for a in sys.argv[1:])


def corpus_source():
    """The engine binary or PTX directory to extract: the configured one, else the synthetic engine."""
    return config["corpus"]["source"] or "resources/engine/engine.bin"


def layer_phases(layer):
    """The phases of a layer, from its descriptor (describe is a checkpoint)."""
    descriptor = checkpoints.describe.get(layer=layer).output.descriptor
    return [p["phase"] for p in read_record(descriptor, DESCRIPTOR)["phases"]]


def check_phase(layer, phase, phases):
    if phase not in phases:
        has = f"its phases are {phases[0]}–{phases[-1]} ({len(phases)})" if phases else "it has no mma"
        raise ValueError(f"layer {layer} has no phase {phase}: {has}")


def cell_inputs(wildcards):
    """The descriptor and every record of a layer × phase cell; a phase the layer does not have
    stops the DAG with the layer's phases named."""
    check_phase(wildcards.layer, int(wildcards.phase), layer_phases(wildcards.layer))
    return {
        "descriptor": layer_descriptor(wildcards),
        "launch": layer_launch_dir(wildcards),
        "reference": reference_compile(wildcards),
        "recipes": recipe_files(wildcards),
        "records": cell_records(wildcards),
    }


def layer_cells(layer):
    """The configured cells of one layer: all its phases or the configured list (a phase the layer
    lacks stops the DAG, as its target would); a layer without mma is its status rows."""
    phases = layer_phases(layer)
    if not phases:
        return [f"results/{layer}_nophases.parquet"]
    chosen = phases if config["phases"] == "all" else [int(p) for p in config["phases"]]
    for phase in chosen:
        check_phase(layer, phase, phases)
    return [f"results/{layer}_phase{p}.parquet" for p in chosen]


def all_cells(wildcards):
    """Every configured cell of every configured layer."""
    return [cell for layer in configured_layers() for cell in layer_cells(layer)]


def entry_pattern(wildcards):
    """The corpus's entry pattern, `{layer}` left in it (a function: params strings are formatted)."""
    return config["corpus"]["entry_pattern"]


def layer_entry(wildcards):
    return config["corpus"]["entry_pattern"].format(layer=wildcards.layer)


def layer_dir(wildcards):
    return f"results/{wildcards.layer}"


# a recipe's files in its cell: this, a dot and the file's name (the records': rr.records' kinds)
RECIPE = "results/{layer}/phase{phase}/{recipe}"


def layer_descriptor(wildcards):
    return str(DESCRIPTOR.within(layer_dir(wildcards)))


# a layer wildcard: a layer's name (rr.layers.LAYER_NAME), not one of the workflow's own
# directories under results/
LAYER_WILDCARD = "(?!(?:{})(?![A-Za-z0-9_$])){}".format("|".join(RESERVED_LAYERS), LAYER_NAME)


def check_layer_names(layers, where):
    for layer in layers:
        if layer in RESERVED_LAYERS:
            raise ValueError(f"{where}: {layer!r} cannot be a layer's name: {RESERVED_LAYERS[layer]}; give its "
                             f"kernel another name in the config (corpus.entry_pattern)")
    return layers


def configured_layers():
    """The layers to process: the configured list, or with `all` every layer the corpus has (the
    synthetic engine's are known without extracting it; a corpus of one's own is extracted first —
    the extract checkpoint — so this is asked only of input functions, once it has run)."""
    if config["layers"] != "all":
        return check_layer_names(list(config["layers"]), "config: layers")
    if config["corpus"]["source"] is None:
        return list(ENGINE_LAYERS)
    index = checkpoints.extract.get().output.index
    from rr.corpus import corpus_layers  # pyarrow and the PTX front end: only for a corpus of one's own

    found = corpus_layers(Path(index).parent, config["corpus"]["entry_pattern"])
    kept = [layer for layer in found if layer not in RESERVED_LAYERS]
    for layer in sorted(set(found) - set(kept)):
        print(f"rr: the corpus's entry {config['corpus']['entry_pattern'].format(layer=layer)} is not made a layer: "
              f"{RESERVED_LAYERS[layer]} (give corpus.entry_pattern a prefix or list the layers)", file=sys.stderr)
    if not kept:
        raise ValueError(f"{config['corpus']['source']}: no kernel entry matches corpus.entry_pattern "
                         f"{config['corpus']['entry_pattern']!r}, so the corpus has no layers")
    return kept


def layer_files(pattern):
    """An input function: `pattern` (a path with {layer}) for every configured layer."""
    return lambda wildcards: [pattern.format(layer=layer) for layer in configured_layers()]

# With the synthetic engine (no corpus configured) a cell's capture is the whole network's frame
# with the cell's layer replaced by the splice; other corpora's layers are launched alone.
FRAME_LAYERS = (
    frozenset(s.name for s in NETWORK)
    if config["corpus"]["source"] is None and not config["corpus"].get("launches")
    else frozenset()
)
FRAME_LAYOUT = "results/frame/layout"
FRAME_REFERENCE = "results/frame/reference"


# On cuda every launch runs ptxas's cubin of its module (rr compile): the GPU runs the code the
# compile records report, and no GPU job waits for the driver to compile PTX at each module load
# (the network's first run at 4K took 35 s of it); the cpu backend interprets the PTX itself.
MODULE = "cubin" if BACKEND == "cuda" else "ptx"


def reference_cubin(layer):
    return f"results/{layer}/reference.cubin"


def launch_inputs(wildcards):
    """A layer's launch is made from the corpus and, where the user brings launches, from those;
    on cuda it runs the layer's reference cubin."""
    inputs = {"index": "resources/corpus/index.parquet"}
    if config["corpus"].get("launches"):
        inputs["launches"] = config["corpus"]["launches"]
    if MODULE == "cubin":
        inputs["cubin"] = reference_cubin(wildcards.layer)
    return inputs


def frame_layout_inputs(wildcards):
    """The frame layout is made from the corpus; on cuda its layers run their reference cubins."""
    inputs = {"index": "resources/corpus/index.parquet"}
    if MODULE == "cubin":
        inputs.update({s.name: reference_cubin(s.name) for s in NETWORK})
    return inputs


def compiled_option(wildcards):
    """rr launch's --module for each layer it launches (on cuda: their reference cubins), or none:
    arguments, each quoted on its own in the command (`{params.compiled:q}`)."""
    if MODULE != "cubin":
        return []
    layers = [s.name for s in NETWORK] if wildcards.get("layer") is None else [wildcards.layer]
    return [arg for layer in layers for arg in ("--module", f"{layer}={reference_cubin(layer)}")]


def launches_option(wildcards):
    """rr launch's option for the user's launches (corpus.launches), or none (arguments, as above)."""
    launches = config["corpus"].get("launches")
    return ["--launches", launches] if launches else []


def in_frame(wildcards):
    return wildcards.layer in FRAME_LAYERS


def layer_launch_dir(wildcards):
    """What a layer's captures run: the frame layout, or the layer's own launch directory."""
    return FRAME_LAYOUT if in_frame(wildcards) else f"results/{wildcards.layer}/launch"


def reference_capture(wildcards):
    """The unspliced run a cell's captures are compared with: the frame's, or the layer's."""
    return FRAME_REFERENCE if in_frame(wildcards) else f"results/{wildcards.layer}/reference"


def splice_module(wildcards):
    """What a splice's launches run: its compiled cubin on cuda, its PTX on the cpu backend."""
    return f"results/{wildcards.layer}/phase{wildcards.phase}/{wildcards.recipe}.{MODULE}"


def measure_inputs(wildcards):
    """A splice's measurement: the layer's launch (or the frame layout), the spliced module, its
    splice record (a probe splice's says what its extra parameter points to) and the reference
    capture it is compared with (on the cpu backend a frame also resumes from it)."""
    return {
        "launch": layer_launch_dir(wildcards),
        "module": splice_module(wildcards),
        "splice_record": str(SPLICE.in_cell(cell_dir(wildcards), wildcards.recipe)),
        "reference": reference_capture(wildcards),
    }


# The layers whose cells also time the splice's layer alone: a frame's, on cuda.
TIMED_ALONE = sorted(FRAME_LAYERS) if BACKEND == "cuda" else []


def layer_in(layers, member):
    """A wildcard constraint: a layer name that is one of `layers` (member), or that is not."""
    names = "|".join(re.escape(layer) for layer in layers) or "(?!)"  # (?!) matches nothing
    return f"(?:{names})" if member else f"(?!(?:{names})(?![A-Za-z0-9_$])){LAYER_WILDCARD}"


def measure_outputs(alone):
    """The records rr measure writes for a recipe: the run, the comparison, on cuda the timing and,
    for a frame's layer (`alone`), the layer's own timing."""
    kinds = MEASURED + ((LAYER_TIMING,) if alone else ())
    return {kind.name: f"{RECIPE}.{kind.file}" for kind in kinds}


def layer_option(wildcards):
    """rr measure's --layer: for a frame, the layer the splice replaces (arguments, as above)."""
    return ["--layer", wildcards.layer] if in_frame(wildcards) else []


def recipe_file(wildcards):
    """config/recipes/<recipe>.yaml when the workflow has it, else the recipe rr ships (as rr splice
    resolves a name)."""
    return str(recipe_path(wildcards.recipe))


def recipe_files(wildcards):
    return [str(recipe_path(r)) for r in config["recipes"]]


# the records of a cell's recipe (rr.records' kinds): rr measure's, with timing only where it can be
# measured (the cpu backend gives none, and collect says so in the row instead of 152 jobs
# recording it), after the splice's and the compile's
MEASURED = (RUN, COMPARE) + ((TIMING,) if BACKEND == "cuda" else ())
RECORDS = (SPLICE, COMPILE) + MEASURED


def cell_records(wildcards):
    """Every record collect reads for a layer × phase cell, for each configured recipe (a frame's
    cell on the GPU also times its layer alone: layer_timing.json)."""
    kinds = RECORDS + ((LAYER_TIMING,) if BACKEND == "cuda" and in_frame(wildcards) else ())
    return [str(kind.in_cell(cell_dir(wildcards), r)) for r in config["recipes"] for kind in kinds]


def reference_compile(wildcards):
    """The compile record of the layer's unspliced module, read beside each of its rows."""
    return str(COMPILE.next_to(reference_cubin(wildcards.layer)))


def cell_dir(wildcards):
    return f"results/{wildcards.layer}/phase{wildcards.phase}"


from rr.fingerprint import STAGES, fingerprint, import_rr_from

# Jobs (`python3 -P -m rr …`) run this checkout's rr, never one in their working directory; cluster
# jobs parse this file again and do the same.
import_rr_from(workflow.basedir)

# The code each stage runs: a change reruns that stage's jobs (and what depends on them) only.
CODE = {stage: fingerprint(stage) for stage in STAGES}


def descriptor_args(wildcards):
    """--descriptor LAYER=PATH for every configured layer (arguments, as above)."""
    return [arg for layer in configured_layers() for arg in ("--descriptor", f"{layer}={DESCRIPTOR.within(f'results/{layer}')}")]


# rr measure's options, shared by its two rules (run.smk)
MEASURE_PARAMS = {
    "code": CODE["run"],
    "backend": BACKEND,
    "noise": config["timing"]["noise"],
    "limit": config["timing"]["time_limit_s"],
    "layer": layer_option,
    "cell": cell_dir,
    "keep": ["--keep"] if config["keep_captures"] else [],
}
def measure_command(alone):
    """rr measure's command, shared by its two rules (run.smk); `alone`: also timed as the layer alone."""
    return (
        "python3 -P -m rr measure {input.launch:q} --module {input.module:q} --splice-record {input.splice_record:q}"
        " --reference {input.reference:q} {params.layer:q} --recipe {wildcards.recipe:q} --backend {params.backend:q}"
        " --noise {params.noise:q} --time-limit {params.limit:q} --timeout 3600 {params.keep:q} --record"
        f"{' --alone {input.alone:q}' if alone else ''} -o {{params.cell:q}} > {{log:q}} 2>&1"
    )


# a layer's composed module: its PTX, beside it its splice record
COMPOSED_PTX = "results/compose/{layer}.ptx"


def composed_splice_record(layer):
    return str(SPLICE.next_to(COMPOSED_PTX.format(layer=layer)))


def composed_layers():
    """The layers the compose stage composes: the configured layers of the network's frame."""
    if not FRAME_LAYERS:
        raise ValueError("results/composed.parquet: the compose stage measures the network's frame, which only the "
                         "synthetic engine has; compose a layer of your own corpus with rr splice --compose "
                         "(docs/compose.md)")
    return [layer for layer in configured_layers() if layer in FRAME_LAYERS]


def composed_module(layer):
    return f"results/compose/{layer}.{MODULE}"


def compose_inputs(wildcards):
    """The frame, its reference capture, and every composed layer's plan, module, splice record
    and (on cuda) the layer alone it is timed against."""
    layers = composed_layers()
    inputs = {
        "layout": FRAME_LAYOUT,
        "reference": FRAME_REFERENCE,
        "plans": [f"results/compose/{layer}.plan.json" for layer in layers],
        "modules": [composed_module(layer) for layer in layers],
        "records": [composed_splice_record(layer) for layer in layers],
    }
    if BACKEND == "cuda":
        inputs["alone"] = [f"results/{layer}/alone.launch" for layer in layers]
    return inputs


def compose_layer_args(wildcards):
    """rr compose-measure's per-layer options, in one order (arguments, each quoted on its own)."""
    args = []
    for layer in composed_layers():
        args += ["--plan", f"results/compose/{layer}.plan.json", "--module", composed_module(layer),
                 "--splice-record", composed_splice_record(layer)]
        if BACKEND == "cuda":
            args += ["--alone", f"results/{layer}/alone.launch"]
    return args
