# rr — the splice-experiment pipeline. Stages live in workflow/rules/, logic in the rr package.
from snakemake.utils import min_version, validate

from rr.validation import checked_config, checked_config_file

min_version("9.0")


# refused before it is read: an alias bomb, or YTE templating (code in a config file)
configfile: checked_config_file("config/config.yaml", workflow.overwrite_configfiles)


validate(checked_config(config), "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/describe.smk"
include: "workflow/rules/splice.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        expand("results/{layer}/statements.parquet", layer=LAYERS),
        all_cells,
        "results/summary.parquet",
        "results/report/identity.png",
