# Corpus: the engine binary (the synthetic engine unless config names one), its extracted PTX
# modules, and the linearised statements of each layer's entry.


wildcard_constraints:
    layer=LAYER_WILDCARD,


rule synth_engine:
    output:
        "resources/engine/engine.bin",
    log:
        "logs/synth_engine.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["synth"],
        arch=config["arch"],
    shell:
        "python3 -P -m rr synth engine --arch {params.arch:q} -o {output:q} > {log:q} 2>&1"


# a checkpoint: with `layers: all` a corpus of one's own names its layers only once extracted
checkpoint extract:
    input:
        corpus_source(),
    output:
        index="resources/corpus/index.parquet",
        modules=directory("resources/corpus/modules"),
    log:
        "logs/extract.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["corpus"],
    shell:
        "python3 -P -m rr extract -o resources/corpus -- {input:q} > {log:q} 2>&1"


# The linearised entry as a table, for people and tools of one's own (`rule all` makes it for every
# layer): no rule reads it — describe parses the module itself (docs/design.md, Architecture).
rule linearise:
    input:
        index="resources/corpus/index.parquet",
    output:
        "results/{layer}/statements.parquet",
    log:
        "logs/linearise/{layer}.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["linearise"],
        entry=layer_entry,
    shell:
        "python3 -P -m rr linearise resources/corpus --entry {params.entry:q} -o {output:q} > {log:q} 2>&1"
