"""``python -m hmem``: the same as the ``hmem`` command."""

from __future__ import annotations

import sys

from hmem.adapters.cli import main

if __name__ == "__main__":
    sys.exit(main())
