"""The one thing pyproject.toml cannot say: the repository's checkpoints/ folder is installed as the package
`transformer.checkpoints`, so a plain `pip install .` carries the shipped models and
`Translator.from_pretrained("en-de")` finds them from any directory (transformer/checkpoint.py looks there first).
Everything else is in pyproject.toml."""
from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["transformer*", "explorer*"]), "transformer.checkpoints"],
      package_dir={"transformer.checkpoints": "checkpoints"})
