"""python -m transformer.analysis COMMAND: the analyses' commands that answer one question on stdout.

    patch   what causes one piece of a translation: activation patching (analysis/causal/cli.py)
"""
import sys

from .causal.cli import main

COMMANDS = {"patch": main}

if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
    sys.stderr.write(f"python -m transformer.analysis: error: give a command, one of {', '.join(COMMANDS)} "
                     "(e.g. python -m transformer.analysis patch --help)\n")
    sys.exit(2)
COMMANDS[sys.argv[1]](sys.argv[2:])
