# Summary and report: every configured cell's rows in one table, and the report's figures, tables
# and first page (`snakemake --report results/report.html`).


# the report's first page: what the sweep is, and (included from results/report/run.rst, written
# by rr report) the backend, frame size and GPU the captures ran on
report: "../report/workflow.rst"


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
        "python3 -P -m rr summary {input:q} -o {output:q} > {log:q} 2>&1"


rule report_figures:
    input:
        summary="results/summary.parquet",
        descriptors=expand(f"results/{{layer}}/{DESCRIPTOR.file}", layer=LAYERS),
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
        compile=report(
            "results/report/compile.png",
            caption="../report/compile.rst",
            category="Compile",
        ),
        compile_table=report(
            "results/report/compile.html",
            caption="../report/compile.rst",
            category="Compile",
        ),
        summary=report(
            "results/report/summary.html",
            caption="../report/summary.rst",
            category="Summary",
        ),
        summary_csv=report(
            "results/report/summary.csv",
            caption="../report/summary.rst",
            category="Summary",
        ),
        phases=report(
            expand("results/report/phases_{layer}.html", layer=LAYERS),
            caption="../report/phases.rst",
            category="Phases",
        ),
        phases_csv=report(
            expand("results/report/phases_{layer}.csv", layer=LAYERS),
            caption="../report/phases.rst",
            category="Phases",
        ),
        first_page="results/report/run.rst",
    log:
        "logs/report_figures.log",
    conda:
        "../envs/rr.yaml"
    params:
        code=CODE["report"],
        descriptors=descriptor_args,
    shell:
        "python3 -P -m rr report {input.summary:q} {params.descriptors:q} -o results/report > {log:q} 2>&1"
