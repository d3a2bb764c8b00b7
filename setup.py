"""Package list only: templates/ sits outside src/ and is mapped in by pyproject's package-dir."""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "pinakes.templates"])
