"""The `rr` command line: `rr.cli.main` builds the parser and runs a command (`rr.cli.main:entry`
is the console script); each stage's commands — their parsers next to their handlers — are a
module here (ptx, corpus, describe, splice, compile, run, synth, launch, collect, report, capture),
sharing rr.cli.common. Nothing is imported here: a stage's code (rr.fingerprint) is its own
module's, not every stage's."""
