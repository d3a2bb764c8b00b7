"""Package list only: templates/ sits outside src/ and is mapped in by pyproject's package-dir; rules/
is found under src/pinakes/rules, a symlink to it."""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "pinakes.templates"])
