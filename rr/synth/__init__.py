"""The synthetic engine (the embedded default corpus) and the NVVM-style PTX builder it is written with."""

from rr.synth.builder import KernelBuilder, KernelParam

__all__ = ["KernelBuilder", "KernelParam"]
