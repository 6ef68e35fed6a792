"""Corpus extraction: PTX modules out of engine binaries, fatbin containers and .ptx files."""

from rr.corpus.extract import Extraction, FoundModule, find_entry, scan_bytes, scan_source, write_corpus
from rr.corpus.fatbin import FatbinEntry, FatbinError, read_container, write_container
from rr.corpus.fnv import fnv1a64, fnv1a64_hex

__all__ = ["Extraction", "FoundModule", "FatbinEntry", "FatbinError", "find_entry", "fnv1a64",
           "fnv1a64_hex", "read_container", "scan_bytes", "scan_source", "write_container",
           "write_corpus"]
