"""Describing a kernel: phases and their geometry, epilogues (operand provenance, offsets and
parameters are still to come — see `spec_json`'s `missing`)."""

from rr.describe.phases import Epilogue, Phase, find_epilogues, find_phases

__all__ = ["Epilogue", "Phase", "find_epilogues", "find_phases"]
