"""Pinakes: a portable, local-first, agent-first knowledge base engine.

Importing the package is cheap on purpose: heavy dependencies (numpy, fastembed, torch, doit)
are imported by the modules that need them, when they need them.
"""

__version__ = "0.1.0"
