# Summary and report: every configured cell's rows in one table, and the report's figures, tables
# and first page (`snakemake --report results/report.html`).


# the report's first page: what the sweep is, and (included from results/report/run.rst, written
# by rr report) the backend, frame size and GPU the captures ran on
report: "../report/workflow.rst"


# `snakemake --report` shows the figures of the sweep this config describes, and Snakemake stops
# with "marked for report but does not exist" when they were never made (the README's main command
# makes one cell's row, not the sweep's figures): say which command makes them instead
if reporting() and not Path("results/report/identity.png").exists():
    _given = " ".join(f"{k}={v}" for k, v in (("layers", config["layers"]), ("phases", config["phases"])))
    raise WorkflowError(
        f"the report is of the sweep the config describes ({_given}) and its figures are not made yet "
        "(results/report/identity.png): run `snakemake --cores N` with the same --config first. For the "
        "README's main cell: snakemake --cores 1 --config 'layers=[enc2]' 'phases=[8]' && snakemake --config "
        "'layers=[enc2]' 'phases=[8]' --report results/report.html"
    )


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
        descriptors=layer_files(f"results/{{layer}}/{DESCRIPTOR.file}"),
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
        # a directory: the layers are not known before a corpus of one's own is extracted
        phases=report(
            directory("results/report/phases"),
            patterns=["phases_{layer}.html", "phases_{layer}.csv"],
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
