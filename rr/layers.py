"""What a layer may be called: the part of its kernel's entry name that `{layer}` stands for in the
entry pattern, and the names the workflow keeps for its own directories."""

# A layer is named by the part of its kernel's entry name that `{layer}` stands for in the entry
# pattern, so it is made of what a PTX name is made of (letters, digits, `_`, `$`; `%` first): safe
# as a path component (no `/`, no `.` or `..`) and as a wildcard, and quoted wherever it reaches a
# command. The workflow's own directories under results/ are not layers.
LAYER_NAME = r"%?[A-Za-z0-9_$]+"
RESERVED_LAYERS = {
    "frame": "results/frame/ holds the network's frame layout and its reference capture",
    "report": "results/report/ holds the report's figures and tables",
}
