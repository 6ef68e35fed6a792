# Describe: the phase table, operand sources, epilogues and parameters of each layer's entry, from
# the module (not from statements.parquet: the analysis needs the parsed module, which the table is
# not). The splices read the descriptor: it is the description their cells were planned from.


checkpoint describe:
    input:
        index="resources/corpus/index.parquet",
    output:
        descriptor=f"results/{{layer}}/{DESCRIPTOR.file}",
        phases="results/{layer}/phases.parquet",
        epilogues="results/{layer}/epilogues.parquet",
    log:
        "logs/describe/{layer}.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["describe"],
        entry=layer_entry,
        out=layer_dir,
        grouping=config["grouping"],
    shell:
        "python3 -P -m rr describe resources/corpus --entry {params.entry:q} --grouping {params.grouping:q}"
        " --record -o {params.out:q} > {log:q} 2>&1"
