"""Package list only: rules/ and templates/ sit outside src/ and are mapped in by pyproject's package-dir."""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "pinakes.rules", "pinakes.templates"])
