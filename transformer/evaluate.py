"""`python -m transformer.evaluate`: the command line of transformer/training/evaluate.py, kept at this name."""
from .training.evaluate import main

if __name__ == "__main__":
    main()
