"""The pinned stack imports together with the versions constraints.txt promises."""

import importlib.metadata as metadata

from packaging.version import Version


def test_pinned_stack_imports_together():
    import dgl
    import numpy
    import pyarrow
    import snakemake  # noqa: F401
    import torch

    assert dgl.__version__ == "2.1.0"
    assert Version(torch.__version__).base_version == "2.2.1"
    assert Version(numpy.__version__) < Version("2")
    assert Version(pyarrow.__version__) < Version("26")
    assert Version(metadata.version("snakemake")).major == 9
    assert Version(metadata.version("torchdata")) == Version("0.7.1")
    assert Version(metadata.version("setuptools")) < Version("70")
    assert Version(metadata.version("snakemake-executor-plugin-slurm")) < Version("2.8")


def test_pyarrow_round_trips_a_frame_with_numpy_1(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"epoch": [0, 1], "loss": [1.5, 0.25]})
    frame.to_parquet(tmp_path / "f.parquet")
    assert pd.read_parquet(tmp_path / "f.parquet").equals(frame)
