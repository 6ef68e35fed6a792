"""Corpus extraction: PTX modules out of engine binaries, fatbin containers and .ptx files."""

from rr.corpus.extract import (CorpusError, Extraction, FoundModule, corpus_layers, find_entry, iter_bytes, iter_source,
                               scan_bytes, scan_source, write_corpus)
from rr.corpus.fatbin import MAX_MODULE_BYTES, FatbinEntry, FatbinError, read_container, write_container
from rr.corpus.fnv import fnv1a64, fnv1a64_hex

__all__ = ["CorpusError", "Extraction", "corpus_layers", "FoundModule", "FatbinEntry", "FatbinError", "MAX_MODULE_BYTES",
           "find_entry", "fnv1a64", "fnv1a64_hex", "iter_bytes", "iter_source", "read_container",
           "scan_bytes", "scan_source", "write_container", "write_corpus"]
