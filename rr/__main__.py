"""`python -m rr …` is the `rr` command; the workflow's jobs use it, so that they need no installed
console script (a rule's conda env has rr's dependencies, and the checkout is on PYTHONPATH)."""

import sys

from rr.cli.main import entry

sys.exit(entry())
