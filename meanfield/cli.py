"""The ``meanfield`` command: a thin layer over `meanfield.experiments`."""
import argparse
import sys

from . import __version__


def build_parser():
    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Self-attention dynamics as a mean-field PDE on the sphere: simulations and checks.")
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
