# rr — the splice-experiment pipeline. Stages live in workflow/rules/, logic in the rr package.
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

import rr

# rr comes from this checkout (Snakemake puts the Snakefile's directory first on sys.path) or, for a
# copy of the workflow without one, from the installed package — never from an `rr/` in the
# directory Snakemake was started in: the jobs run the same code (rr.fingerprint.import_rr_from)
_rr = Path(rr.__file__).resolve().parent
_checkout = Path(workflow.basedir, "rr").resolve()
if _rr != _checkout and (_checkout.is_dir() or _rr == Path("rr").resolve()):
    raise WorkflowError(f"rr was imported from {_rr}, not from this workflow's checkout {workflow.basedir}: "
                        f"start Snakemake without that directory on sys.path")

from rr.run.gpus import gpu_job_slots
from rr.validation import checked_config, checked_config_file

min_version("9.0")

# GPU jobs at once: eight per GPU the CUDA driver shows (CUDA_VISIBLE_DEVICES honoured; at least
# one GPU's worth, so that a forced cuda backend on a host without one still runs and records
# no_device), unless --resources gpu=N or a profile (the SLURM one) says. It is not what keeps them
# apart: each capture and each timing claims a device of its own for its time on it (rr.run.gpus)
# and its kernel process sees only that device, so the other jobs start, check their launches and
# compare their captures meanwhile — the device is not left idle for that.
if "gpu" not in workflow.global_resources:
    workflow.register_resource("gpu", gpu_job_slots())


# refused before it is read: an alias bomb, or YTE templating (code in a config file)
configfile: checked_config_file("config/config.yaml", workflow.overwrite_configfiles)


validate(checked_config(config), "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"


# set by common.smk from the config (gpu_worker, the backend): passed on to cluster jobs
envvars:
    "RR_WORKER",


include: "workflow/rules/corpus.smk"
include: "workflow/rules/describe.smk"
include: "workflow/rules/splice.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/compose.smk"


# the composed engine, once made (snakemake results/composed.parquet), is kept up to date by the
# default target, and its page is part of the report
COMPOSED = ["results/composed.parquet"] if Path("results/composed.parquet").exists() else []


rule all:
    input:
        COMPOSED,
        layer_files("results/{layer}/statements.parquet"),
        all_cells,
        "results/summary.parquet",
        "results/report/identity.png",
