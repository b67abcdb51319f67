"""`python -m transformer.distill`: the command line of transformer/training/distill_cli.py, kept at this name."""
from .training.distill_cli import main

if __name__ == "__main__":
    main()
