# Helpers shared by the rules: config lookups, so that no rule holds logic of its own.


def corpus_source():
    """The engine binary or PTX directory to extract: the configured one, else the built-in sample."""
    return config["corpus"]["source"] or "resources/engine/engine.bin"


def layer_entry(wildcards):
    return config["corpus"]["entry_pattern"].format(layer=wildcards.layer)


def layer_dir(wildcards):
    return f"results/{wildcards.layer}"


def recipe_file(wildcards):
    return f"config/recipes/{wildcards.recipe}.yaml"


def cell_records(wildcards):
    """Every record collect reads for a layer × phase cell, for each configured recipe."""
    cell = f"results/{wildcards.layer}/phase{wildcards.phase}"
    return [
        f"{cell}/{r}.{kind}"
        for r in config["recipes"]
        for kind in (
            "ptx.splice.json",
            "cubin.json",
            "run.json",
            "compare.json",
            "timing.json",
        )
    ]


def cell_dir(wildcards):
    return f"results/{wildcards.layer}/phase{wildcards.phase}"


from rr.fingerprint import fingerprint

# The code each stage runs: a change reruns that stage's jobs (and what depends on them) only.
CODE = {
    stage: fingerprint(stage)
    for stage in (
        "corpus",
        "linearise",
        "describe",
        "splice",
        "compile",
        "run",
        "collect",
    )
}
