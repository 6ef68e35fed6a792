"""Results: the fixed Parquet schema of a cell's rows, and collecting the stages' records into it."""

from rr.results.schema import RESULTS_SCHEMA

__all__ = ["RESULTS_SCHEMA"]
