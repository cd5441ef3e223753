"""`python -m meanfield`: the `meanfield` command (meanfield.cli)."""
import sys

from .cli import main

sys.exit(main())
