"""Describing a kernel: its phases and their GEMM geometry, epilogues (`phases`), where each
phase's operands come from and at which byte offsets (`provenance`, over the symbolic address
values of `values`), its loops (`loops`), what each epilogue does and what the parameter block
holds (`summary`), and the descriptor `rr spec` prints and the workflow's stages read (`spec`)."""

from rr.describe.phases import Epilogue, Phase, find_epilogues, find_phases

__all__ = ["Epilogue", "Phase", "find_epilogues", "find_phases"]
