"""`python -m transformer.data`: the command line of transformer/corpus/data.py, kept at this name."""
from .corpus.data import main

if __name__ == "__main__":
    main()
