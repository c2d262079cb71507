"""The package's version (one place: ``pyproject.toml`` holds the same string, checked by a test)."""

__version__ = "0.1.0"
