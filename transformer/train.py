"""`python -m transformer.train`: the command line of transformer/training/train.py, kept at this name."""
from .training.train import main

if __name__ == "__main__":
    main()
