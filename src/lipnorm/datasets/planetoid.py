"""The planetoid citation graphs (Yang et al. 2016): `cora`, `citeseer`, `pubmed`, with
their public split, through DGL's `CitationGraphDataset`."""

from __future__ import annotations

import functools
from pathlib import Path

from lipnorm.registry.entries import DatasetSizes, RawFiles
from lipnorm.registry.register import register_dataset

_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")

# SHA-256 of the planetoid raw files (Yang et al. 2016), as listed in the mirror's
# SHA256SUMS; DGL renamed the Cora files to `ind.cora_v2.*`, their bytes are unchanged.
# PubMed's are recorded on first fetch (`lipnorm.data.sources`).
CORA_SHA256 = {
    "ind.cora_v2.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora_v2.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora_v2.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora_v2.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.cora_v2.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora_v2.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora_v2.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora_v2.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
}
CITESEER_SHA256 = {
    "ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
}


def raw_files(dgl_name: str, sha256: dict[str, str] | None = None) -> RawFiles:
    """The raw files of DGL's planetoid archive `dgl_name` (`cora_v2`, `citeseer`, `pubmed`)."""
    return RawFiles("dgl", dgl_name, tuple(f"ind.{dgl_name}.{part}" for part in _PARTS), sha256)


def read(name: str, folder: Path, raw_features: bool = False):
    """cora, citeseer, pubmed with their public planetoid split.

    DGL's `CitationGraphDataset` row-normalises the features (every non-empty row sums
    to 1). `raw_features=True` gives the rows as stored in the planetoid files (Cora and
    CiteSeer: binary bag-of-words; PubMed: TF-IDF), i.e. what PyG's `Planetoid` without
    transforms returns, through the same DGL loading code (see
    `_raw_feature_citation_dataset`): same nodes, order, labels, split and graph.
    """
    from dgl.data import CitationGraphDataset

    from lipnorm.data.dataset import build_node_dataset

    dataset_class = _raw_feature_citation_dataset() if raw_features else CitationGraphDataset
    data = dataset_class(name, raw_dir=str(folder.parent), verbose=False)
    graph = data[0]
    src, dst = graph.edges()
    masks = tuple(graph.ndata[f"{split}_mask"] for split in ("train", "val", "test"))
    return build_node_dataset(
        name, src, dst, graph.num_nodes(), graph.ndata["feat"], graph.ndata["label"],
        masks, data.num_classes, multilabel=False, metric="accuracy",
    )


def _dense_rows(features):
    """`dgl.data.citation_graph._preprocess_features` without its row normalisation."""
    import numpy as np

    return np.asarray(features.todense())


@functools.cache
def _raw_feature_citation_dataset() -> type:
    """DGL's `CitationGraphDataset` keeping the stored feature rows.

    DGL builds the feature matrix in `process()` (the pickled scipy matrices `allx` and
    `tx` stacked, test rows put in graph order, CiteSeer's missing test rows added as
    zeros) and then calls the module function `_preprocess_features`, which row-normalises
    and densifies. This subclass runs that same `process()` with `_preprocess_features`
    replaced, for the duration of the call, by `_dense_rows` (densify only;
    `lipnorm.dgl_private.citation_features_replaced`), so nothing
    of the file parsing is re-implemented here. Its processed cache has its own name
    (`<name>_dgl_graph_raw_features.bin`/`.pkl` beside DGL's), so the normalised cache is
    never touched. The swap is of a module global, so it assumes no other thread is
    processing a citation dataset at the same time (callers hold the dataset folder's
    lock). If a DGL version stops calling `_preprocess_features`, processing fails rather
    than silently returning normalised rows.
    """
    from dgl.data import CitationGraphDataset

    from lipnorm.dgl_private import citation_features_replaced

    class RawFeatureCitationGraphDataset(CitationGraphDataset):
        @property
        def save_name(self) -> str:
            return f"{self.name}_dgl_graph_raw_features"

        def process(self) -> None:
            calls = []

            def dense_rows(features):
                calls.append(1)
                return _dense_rows(features)

            with citation_features_replaced(dense_rows):
                super().process()
            if len(calls) != 1:
                raise RuntimeError(
                    f"dgl.data.citation_graph.process() called _preprocess_features {len(calls)} "
                    "time(s), expected once: this DGL version builds the features differently, "
                    "so the raw feature rows cannot be recovered through its loader"
                )

    return RawFeatureCitationGraphDataset


# Sizes as `lipnorm.data` loads them: self-loops removed, then one per node added
# (`build_node_dataset`). Cora and CiteSeer counted from the loaded graphs; PubMed: DGL's
# 88,651 edges less its 3 self-loops (PyG's 88,648). Colours: seaborn's colour-blind palette.
register_dataset(
    "cora", label="Cora", colour="#0173b2",
    sizes=DatasetSizes(nodes=2708, edges=10556 + 2708, features=1433, classes=7, train_nodes=140),
    raw=raw_files("cora_v2", CORA_SHA256), read=functools.partial(read, "cora"), options=("raw_features",),
)
register_dataset(
    "citeseer", label="CiteSeer", colour="#de8f05",
    sizes=DatasetSizes(nodes=3327, edges=9104 + 3327, features=3703, classes=6, train_nodes=120),
    raw=raw_files("citeseer", CITESEER_SHA256), read=functools.partial(read, "citeseer"), options=("raw_features",),
)
register_dataset(
    "pubmed", label="PubMed", colour="#029e73",
    sizes=DatasetSizes(nodes=19717, edges=88648 + 19717, features=500, classes=3, train_nodes=60),
    raw=raw_files("pubmed"), read=functools.partial(read, "pubmed"), options=("raw_features",),
)
