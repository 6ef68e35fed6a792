# Run: the layer's reference launch and each splice on the same inputs, captured, compared and
# timed; then one Parquet row per recipe. Every stage writes a record, also when it fails. A splice's
# capture links the buffers it left as they were to the reference's files (rr run --reference), and
# unless keep_captures its capture and launch directories go once measured (rr measure --keep).
# What the GPU waits for (the reference compiles, launches and captures) has the highest priority,
# the GPU's own jobs the next: Snakemake otherwise ran a sweep's splices and compiles first, and
# the GPU of a 4K sweep sat idle for its first seven minutes.


rule launch:
    priority: 20
    input:
        unpack(launch_inputs),
    output:
        directory("results/{layer}/launch"),
    log:
        "logs/launch/{layer}.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["launch"],
        frame=FRAME,
        seed=config["input_seed"],
        pattern=config["corpus"]["entry_pattern"],
        launches=launches_option,
        compiled=compiled_option,
    shell:
        "python3 -P -m rr launch --frame {params.frame:q} --seed {params.seed:q} --entry-pattern {params.pattern:q}"
        " {params.launches:q} {params.compiled:q} --record -o {output:q} -- {wildcards.layer:q} resources/corpus"
        " > {log:q} 2>&1"


rule frame_layout:
    priority: 20
    input:
        unpack(frame_layout_inputs),
    output:
        directory(FRAME_LAYOUT),
    log:
        "logs/launch/frame.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["launch"],
        frame=FRAME,
        seed=config["input_seed"],
        pattern=entry_pattern,
        compiled=compiled_option,
    shell:
        "python3 -P -m rr launch frame resources/corpus --frame {params.frame:q} --seed {params.seed:q}"
        " --entry-pattern {params.pattern:q} {params.compiled:q} -o {output:q} > {log:q} 2>&1"


rule capture_frame:
    priority: 20
    input:
        FRAME_LAYOUT,
    output:
        directory(FRAME_REFERENCE),
    log:
        "logs/capture/frame_reference.log",
    # the unspliced frame, the same for every workflow with the same layout and rr
    cache: True
    conda:
        "../envs/rr.yaml"
    threads: GPU_JOB_THREADS
    resources:
        gpu=GPU,
    params:
        code=CODE["run"],
        backend=BACKEND,
    shell:
        "python3 -P -m rr run {input:q} --backend {params.backend:q} --timeout 3600 --record -o {output:q} > {log:q} 2>&1"


rule capture_reference:
    priority: 20
    input:
        "results/{layer}/launch",
    output:
        directory("results/{layer}/reference"),
    log:
        "logs/capture/{layer}_reference.log",
    # the unspliced frame of a layer, the same for every workflow with the same launch and rr
    cache: True
    conda:
        "../envs/rr.yaml"
    threads: GPU_JOB_THREADS
    resources:
        gpu=GPU,
    params:
        code=CODE["run"],
        backend=BACKEND,
    shell:
        "python3 -P -m rr run {input:q} --backend {params.backend:q} --record -o {output:q} > {log:q} 2>&1"


rule compile_reference:
    priority: 20
    input:
        index="resources/corpus/index.parquet",
    output:
        cubin="results/{layer}/reference.cubin",
        report=str(COMPILE.next_to(reference_cubin("{layer}"))),
    log:
        "logs/compile/{layer}_reference.log",
    # the unspliced module's ptxas figures, once per layer: each row's ref_* columns and deltas
    cache: True
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["compile"],
        arch=config["arch"],
        entry=layer_entry,
    shell:
        "python3 -P -m rr compile resources/corpus --entry {params.entry:q} --arch {params.arch:q} --record"
        " -o {output.cubin:q} > {log:q} 2>&1"


rule layer_alone:
    priority: 20
    input:
        FRAME_REFERENCE,
    output:
        directory("results/{layer}/alone.launch"),
    log:
        "logs/launch/{layer}_alone.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["run"],
    shell:
        "python3 -P -m rr relaunch {input:q} --layer {wildcards.layer:q} --extract -o {output:q} > {log:q} 2>&1"


# A splice measured whole (rr measure): launched, captured with the reference's unchanged buffers
# linked, compared, and on cuda timed — in one job a recipe, the GPU claimed for each capture and
# timing only (rr.run.gpus), so that a few such jobs per GPU (profiles/default) keep it busy. Two
# rules, one record more for a frame's layer on cuda: its splice is also timed with the layer alone.
rule measure:
    priority: 10
    wildcard_constraints:
        layer=layer_in(TIMED_ALONE, False),
    input:
        unpack(measure_inputs),
    output:
        **measure_outputs(alone=False),
    log:
        "logs/measure/{layer}_phase{phase}_{recipe}.log",
    conda:
        "../envs/rr.yaml"
    threads: GPU_JOB_THREADS
    resources:
        gpu=GPU,
    params:
        **MEASURE_PARAMS,
    shell:
        measure_command(alone=False)


rule measure_in_frame:
    priority: 10
    wildcard_constraints:
        layer=layer_in(TIMED_ALONE, True),
    input:
        unpack(measure_inputs),
        alone="results/{layer}/alone.launch",
    output:
        **measure_outputs(alone=True),
    log:
        "logs/measure/{layer}_phase{phase}_{recipe}.log",
    conda:
        "../envs/rr.yaml"
    threads: GPU_JOB_THREADS
    resources:
        gpu=GPU,
    params:
        **MEASURE_PARAMS,
    shell:
        measure_command(alone=True)


rule collect:
    input:
        unpack(cell_inputs),
    output:
        "results/{layer}_phase{phase}.parquet",
    log:
        "logs/collect/{layer}_phase{phase}.log",
    conda:
        "../envs/rr.yaml"
    # paths as params, not {input.…}: a dry run formats the command before the describe checkpoint
    # has run, when the input function (which needs the layer's phases) is not evaluated yet
    params:
        code=CODE["collect"],
        cell=cell_dir,
        recipes=",".join(config["recipes"]),
        descriptor=layer_descriptor,
        launch=layer_launch_dir,
        reference=reference_compile,
        backend=BACKEND,
    shell:
        "python3 -P -m rr collect {params.cell:q} --layer {wildcards.layer:q} --phase {wildcards.phase:q}"
        " --recipes {params.recipes:q} --descriptor {params.descriptor:q} --module resources/corpus"
        " --launch {params.launch:q} --reference-compile {params.reference:q} --backend {params.backend:q}"
        " -o {output:q} > {log:q} 2>&1"


rule layer_status:
    input:
        index="resources/corpus/index.parquet",
        descriptor=f"results/{{layer}}/{DESCRIPTOR.file}",
    output:
        "results/{layer}_nophases.parquet",
    log:
        "logs/collect/{layer}_nophases.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["collect"],
        cell=layer_dir,
        recipes=",".join(config["recipes"]),
    shell:
        "python3 -P -m rr collect {params.cell:q} --layer {wildcards.layer:q} --recipes {params.recipes:q}"
        " --descriptor {input.descriptor:q} --module resources/corpus -o {output:q} > {log:q} 2>&1"
