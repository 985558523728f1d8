"""Allow ``python -m dockergen``."""

from dockergen.cli import main

main()
