"""Package list only: templates/ and rules/ sit outside src/ and are mapped in by pyproject's package-dir."""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "pinakes.templates", "pinakes.rules"])
