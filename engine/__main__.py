"""``python -m engine``; the guard keeps vLLM's spawned processes from re-running it."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
