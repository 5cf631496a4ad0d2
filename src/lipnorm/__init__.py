"""LipschitzNorm for graph attention networks, on DGL."""

import os

# DGL picks its backend at import time and warns when none is configured.
os.environ.setdefault("DGLBACKEND", "pytorch")
# ogb (imported by dgl.data) checks PyPI for a newer release on import; runs must not
# depend on the network.
os.environ.setdefault("OUTDATED_IGNORE", "1")

__version__ = "0.1.0"
