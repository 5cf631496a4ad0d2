"""The missing-features pool through the workflow: SNR's presets (recipe snr, pool
"evaluation") get masks of their own, in their own folder, from rule mask_pool; every
other preset's masks keep rule mask's path and command, so that existing masks, and the
runs made from them, are not rerun."""

from __future__ import annotations

import re

import pytest

from tests.repository.test_workflow import REPO, job_counts, snakemake

SNR_PRESETS = ["snr-lr0.01", "snr-lr0.001"]


@pytest.mark.parametrize("preset", SNR_PRESETS)
def test_snr_presets_train_on_evaluation_masks(tmp_path, preset):
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", REPO / "config" / "presets" / f"{preset}.yaml")
    output = proc.stdout + proc.stderr
    counts = job_counts(output)
    # The 5 seeds of each (dataset, model) train as one seed batch (recipe snr's, SeedBatchedSNR).
    assert counts["mask_pool"] == 10 and counts["train_seeds"] == 4 and "train" not in counts and "mask" not in counts
    masks = set(re.findall(r"lipnorm data mask\s+(\w+) --pool evaluation --rate 100 --seed (\d) --out (\S+)", output))
    assert masks == {
        (dataset, str(seed), f"resources/masks/{dataset}/evaluation/rate100_seed{seed}.npy")
        for dataset in ("cora", "citeseer") for seed in range(5)
    }
    trains = re.findall(r"exec lipnorm train .*", output)
    assert len(trains) == 4
    lr = preset.removeprefix("snr-lr")
    for command in trains:
        dataset = re.search(r"--dataset (\w+) ", command).group(1)
        assert "--seeds 0,1,2,3,4 " in command
        assert f"--mask resources/masks/{dataset}/evaluation/rate100_seed{{seed}}.npy" in command
        assert "--recipe snr" in command and "--residual" in command and f"--lr {lr} " in command
        assert f"--depth {6 if dataset == 'cora' else 4} " in command  # their Table 5's depths


def test_other_presets_keep_rule_masks_path_and_command(tmp_path):
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", REPO / "config" / "presets" / "literature-depth20.yaml")
    output = proc.stdout + proc.stderr
    assert "mask_pool" not in job_counts(output)
    masks = re.findall(r"lipnorm data mask .*", output)
    assert masks and all(
        re.fullmatch(
            r"lipnorm data mask\s+cora --rate 100 --seed (\d) --out resources/masks/cora/rate100_seed\1\.npy "
            r"--root resources/datasets\s+> resources/logs/masks/cora/rate100_seed\1\.log 2>&1",
            command,
        )
        for command in masks
    ), masks


def test_schema_missing_pool_is_the_library_names():
    import yaml

    from lipnorm.settings.recipes import MISSING_POOLS

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["$defs"]["train_settings"]["properties"]["missing_pool"]["enum"] == list(MISSING_POOLS)
