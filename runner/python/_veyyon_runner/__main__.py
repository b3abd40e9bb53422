"""``python3 -m _veyyon_runner``: serve the protocol (see runner.py beside this package)."""

from .server import main

main()
