# Splice and compile: a recipe applied to one phase of a layer, then ptxas on the result.


wildcard_constraints:
    phase="[1-9][0-9]*",
    recipe="[a-z][a-z0-9_]*",


# A splice cuts the phase its layer's descriptor describes — the description its cell was planned
# from (the layer's phases are the descriptor's: describe is a checkpoint) —, and rr splice refuses
# a descriptor that is not of this module, entry and grouping.
rule splice:
    input:
        index="resources/corpus/index.parquet",
        descriptor=layer_descriptor,
        recipe=recipe_file,
    output:
        ptx="results/{layer}/phase{phase}/{recipe}.ptx",
        record=f"{RECIPE}.{SPLICE.file}",
    log:
        "logs/splice/{layer}_phase{phase}_{recipe}.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["splice"],
        entry=layer_entry,
        grouping=config["grouping"],
    shell:
        "python3 -P -m rr splice resources/corpus --entry {params.entry:q} --recipe {input.recipe:q}"
        " --phase {wildcards.phase:q} --grouping {params.grouping:q} --descriptor {input.descriptor:q}"
        " --record -o {output.ptx:q} > {log:q} 2>&1"


rule compile:
    input:
        "results/{layer}/phase{phase}/{recipe}.ptx",
    output:
        cubin="results/{layer}/phase{phase}/{recipe}.cubin",
        report=f"{RECIPE}.{COMPILE.file}",
    log:
        "logs/compile/{layer}_phase{phase}_{recipe}.log",
    # ptxas on a large entry takes seconds to minutes: the same PTX, arch and rr compile again
    # are served from --cache (SNAKEMAKE_OUTPUT_CACHE) between workflows
    cache: True
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["compile"],
        arch=config["arch"],
    shell:
        "python3 -P -m rr compile --arch {params.arch:q} --record -o {output.cubin:q} -- {input:q} > {log:q} 2>&1"
