"""`python -m transformer.data`: the command line of transformer/training/data.py, kept at this name."""
from .training.data import main

if __name__ == "__main__":
    main()
