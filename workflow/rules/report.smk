# Summary and report: every configured cell's rows in one table, and the report's figures and
# tables (`snakemake --report results/report.html`).


rule summary:
    input:
        all_cells,
    output:
        "results/summary.parquet",
    log:
        "logs/summary.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["report"],
    shell:
        "python3 -m rr summary {input} -o {output} > {log} 2>&1"


rule report_figures:
    input:
        summary="results/summary.parquet",
        descriptors=expand("results/{layer}/descriptor.json", layer=config["layers"]),
    output:
        identity=report(
            "results/report/identity.png",
            caption="../report/identity.rst",
            category="Identity",
        ),
        ratios=report(
            "results/report/ratios.png",
            caption="../report/ratios.rst",
            category="Timing",
        ),
        registers=report(
            "results/report/registers.png",
            caption="../report/registers.rst",
            category="Compile",
        ),
        summary=report(
            "results/report/summary.csv",
            caption="../report/summary.rst",
            category="Summary",
        ),
        phases=report(
            expand("results/report/phases_{layer}.csv", layer=config["layers"]),
            caption="../report/phases.rst",
            category="Phases",
        ),
    log:
        "logs/report_figures.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["report"],
        descriptors=descriptor_args,
    shell:
        "python3 -m rr report {input.summary} {params.descriptors} -o results/report > {log} 2>&1"
