"""`python -m transformer.model_card`: the command line of transformer/training/model_card.py, kept at this name."""
from .training.model_card import main

if __name__ == "__main__":
    main()
