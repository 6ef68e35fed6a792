"""Splicing: cut a phase out of an entry and put a native implementation in its place."""
