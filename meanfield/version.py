"""The version of the package (one place, read by `meanfield.__version__`, the CLI and the files it writes)."""
__version__ = "0.1.0"
