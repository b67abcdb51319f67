"""`python -m transformer.diversify`: the command line of transformer/training/diversify.py, kept at this name."""
from .training.diversify import main

if __name__ == "__main__":
    main()
