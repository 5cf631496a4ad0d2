"""The presets of the published rows' own protocols (issue 49, item 2): DropEdge at the
DropEdge authors' rates under DGN's network and under DeCorr's GAT; each job trains what
its preset says."""

from __future__ import annotations

import re

import pytest

from tests.repository.test_workflow import REPO, job_counts, snakemake

# preset -> per dataset, the train flags every job of it carries
DROPEDGE = {
    "dropedge-authors": {"cora": "--recipe dgn --dropedge 0.6 --threads", "citeseer": "--recipe dgn --dropedge 0.8 --threads"},
    "dropedge-decorr": {
        "cora": "--recipe dgn --dropedge 0.6 --no-output-relu --lr 0.01 --threads",
        "citeseer": "--recipe dgn --dropedge 0.8 --no-output-relu --lr 0.01 --threads",
    },
}


@pytest.mark.parametrize("preset", list(DROPEDGE))
def test_dropedge_presets_train_the_authors_rates_at_the_published_depth(tmp_path, preset):
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", REPO / "config" / "presets" / f"{preset}.yaml")
    output = proc.stdout + proc.stderr
    assert job_counts(output)["train_seeds"] == 4  # 2 datasets x GAT, GAT-Lip, seeds 0-4 in one job each
    trains = re.findall(r"exec lipnorm train .*", output)
    seen = set()
    for command in trains:
        dataset, model = re.search(r"--dataset (\w+) --model ([\w-]+) --depth 6 ", command).groups()
        assert "--seeds 0,1,2,3,4 --mask resources/masks/" + dataset + "/rate100_seed{seed}.npy" in command
        assert DROPEDGE[preset][dataset] in command
        seen.add((dataset, model))
    assert seen == {(d, m) for d in ("cora", "citeseer") for m in ("gat", "gat-lip")}
