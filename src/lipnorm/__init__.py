"""LipschitzNorm for graph attention networks, on DGL."""

import os
import sys

# DGL picks its backend at import time and warns when none is configured.
os.environ.setdefault("DGLBACKEND", "pytorch")
# `import dgl` imports ogb, whose version check (package `outdated`, used by nothing
# else) asks PyPI for newer releases of ogb and of itself in two non-daemon threads
# that retry for ~3 s without a network, so every process waited that long to exit.
# ogb treats a failed `import outdated` as "skip the check"; make it fail.
sys.modules.setdefault("outdated", None)

__version__ = "0.1.0"
