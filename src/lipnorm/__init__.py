"""LipschitzNorm for graph attention networks, on DGL."""

import os

# DGL picks its backend at import time and warns when none is configured.
os.environ.setdefault("DGLBACKEND", "pytorch")

__version__ = "0.1.0"
