"""Describing a kernel: its phases and their GEMM geometry, epilogues (`phases`); its dataflow
(`dataflow`: the analysed kernel of `kernel` — statements, control flow, reaching definitions —,
its symbolic values, `evaluation`, over the polynomials of `values`, and its memory accesses,
`memory`); where each phase's operands come from and at which byte offsets (`provenance`, its
sources as values in `sources`, their plain data in `operand_json`); its loops (`loops`), what
each epilogue does and what the parameter block holds (`summary`), and the descriptor `rr spec`
prints and the workflow's stages read (`spec`)."""

from rr.describe.phases import Epilogue, Phase, find_epilogues, find_phases

__all__ = ["Epilogue", "Phase", "find_epilogues", "find_phases"]
