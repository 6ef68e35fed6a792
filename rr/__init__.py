"""rr — a declarative pipeline for PTX splice experiments on the Swin layers of a denoiser engine."""

__version__ = "0.1.0"
