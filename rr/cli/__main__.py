"""`python -m rr.cli …` is the `rr` command, as `python -m rr …` is."""

import sys

from rr.cli.main import entry

sys.exit(entry())
