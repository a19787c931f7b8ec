"""hmem's version (its own module, so any module can import it without the package)."""

__version__ = "0.1.0"
