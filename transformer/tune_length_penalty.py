"""`python -m transformer.tune_length_penalty`: the command line of transformer/training/tune_length_penalty.py."""
from .training.tune_length_penalty import main

if __name__ == "__main__":
    main()
