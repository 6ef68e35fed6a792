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
