# Compose: from the sweep's rows to a faster engine (docs/compose.md). Per layer of the network's
# frame, the splices that left the frame byte-identical and ran the layer faster than its noise,
# in one module; then the frame with every layer's composition in place, captured, compared and
# (on cuda) timed, what is at fault bisected; results/composed.parquet.


rule compose_plan:
    input:
        cells=lambda wildcards: layer_cells(wildcards.layer),
    output:
        plan="results/compose/{layer}.plan.json",
        spec="results/compose/{layer}.spec.json",
    log:
        "logs/compose/{layer}_plan.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["compose"],
        k=config["compose"]["noise_multiple"],
        recipes=",".join(config["compose"]["recipes"] or config["recipes"]),
    shell:
        "python3 -P -m rr compose-plan {input.cells:q} --layer {wildcards.layer:q} --noise-multiple {params.k:q}"
        " --recipes {params.recipes:q} -o {output.plan:q} --spec {output.spec:q} > {log:q} 2>&1"


rule compose_splice:
    input:
        index="resources/corpus/index.parquet",
        spec="results/compose/{layer}.spec.json",
        descriptor=layer_descriptor,
        recipes=recipe_files,
    output:
        ptx=COMPOSED_PTX,
        record=str(SPLICE.next_to(COMPOSED_PTX)),
    log:
        "logs/compose/{layer}_splice.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["splice"],
        entry=layer_entry,
        grouping=config["grouping"],
    shell:
        "python3 -P -m rr splice resources/corpus --entry {params.entry:q} --compose {input.spec:q}"
        " --grouping {params.grouping:q} --descriptor {input.descriptor:q} --record -o {output.ptx:q} > {log:q} 2>&1"


rule compose_compile:
    input:
        "results/compose/{layer}.ptx",
    output:
        cubin="results/compose/{layer}.cubin",
        report=str(COMPILE.next_to("results/compose/{layer}.cubin")),
    log:
        "logs/compose/{layer}_compile.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["compile"],
        arch=config["arch"],
    shell:
        "python3 -P -m rr compile --arch {params.arch:q} --record -o {output.cubin:q} -- {input:q} > {log:q} 2>&1"


rule compose_measure:
    priority: 10
    input:
        unpack(compose_inputs),
    output:
        table="results/composed.parquet",
        html=report(
            "results/compose/composed.html",
            caption="../report/composed.rst",
            category="Composition",
        ),
        record="results/compose/network.json",
    log:
        "logs/compose/network.log",
    conda:
        "../envs/rr.yaml"
    threads: GPU_JOB_THREADS
    resources:
        gpu=GPU,
    params:
        code=CODE["compose"],
        layers=compose_layer_args,
        backend=BACKEND,
        arch=config["arch"],
        grouping=config["grouping"],
        noise=config["timing"]["noise"],
        limit=config["timing"]["time_limit_s"],
        k=config["compose"]["noise_multiple"],
    shell:
        "python3 -P -m rr compose-measure {input.layout:q} --reference {input.reference:q} --corpus resources/corpus"
        " {params.layers:q} --backend {params.backend:q} --arch {params.arch:q} --grouping {params.grouping:q}"
        " --noise {params.noise:q} --noise-multiple {params.k:q} --time-limit {params.limit:q} -o {output.table:q}"
        " --html {output.html:q} --json {output.record:q} > {log:q} 2>&1"
