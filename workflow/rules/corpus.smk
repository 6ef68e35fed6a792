# Corpus: the engine binary (the synthetic engine unless config names one), its extracted PTX
# modules, and the linearised statements of each layer's entry.


wildcard_constraints:
    layer="[a-z][a-z0-9]*",


rule synth_engine:
    output:
        "resources/engine/engine.bin",
    log:
        "logs/synth_engine.log",
    params:
        code=CODE["synth"],
        arch=config["arch"],
    shell:
        "rr synth engine --arch {params.arch} -o {output} > {log} 2>&1"


rule extract:
    input:
        corpus_source(),
    output:
        index="resources/corpus/index.parquet",
        modules=directory("resources/corpus/modules"),
    log:
        "logs/extract.log",
    params:
        code=CODE["corpus"],
    shell:
        "rr extract {input} -o resources/corpus > {log} 2>&1"


rule linearise:
    input:
        index="resources/corpus/index.parquet",
    output:
        "results/{layer}/statements.parquet",
    log:
        "logs/linearise/{layer}.log",
    params:
        code=CODE["linearise"],
        entry=layer_entry,
    shell:
        "rr linearise resources/corpus --entry {params.entry} -o {output} > {log} 2>&1"
