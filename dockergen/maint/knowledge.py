"""``python -m dockergen.maint.knowledge check|live|refresh`` (see :mod:`.knowledge_check`).
"""

from __future__ import annotations

import sys

from dockergen.maint.knowledge_check import main

if __name__ == "__main__":
    sys.exit(main())
