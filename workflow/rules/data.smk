"""Datasets: download and verify once, then one missing-features mask per pool, rate and seed."""


rule download:
    output:
        ready=touch(DATASET_READY),
    log:
        f"{RESOURCES}/logs/datasets/{{dataset}}.log",
    # Downloads need the network (or the mirror), which cluster nodes may lack.
    localrule: True
    params:
        root=lambda wildcards, output: os.path.dirname(output.ready),
        mirror=mirror_args(),
    shell:
        "lipnorm data fetch {wildcards.dataset} --root {params.root} {params.mirror} > {log} 2>&1"


rule mask:
    input:
        ready=dataset_ready,
    output:
        mask=MASK,
    log:
        f"{RESOURCES}/logs/masks/{{dataset}}/rate{{rate}}_seed{{seed}}.log",
    params:
        root=dataset_root,
        csbm=csbm_args,
        plugins=PLUGIN_ARGS,
    shell:
        "lipnorm data mask {params.plugins} {wildcards.dataset} --rate {wildcards.rate} --seed {wildcards.seed} --out {output.mask} --root {params.root} {params.csbm} > {log} 2>&1"


# The masks of a pool other than "unlabelled" (SNR's "evaluation"), each in a folder of
# the pool's name: a rule of its own, so that rule mask and its masks stay as they were.
rule mask_pool:
    input:
        ready=dataset_ready,
    output:
        mask=POOL_MASK,
    log:
        f"{RESOURCES}/logs/masks/{{dataset}}/{{pool}}/rate{{rate}}_seed{{seed}}.log",
    params:
        root=dataset_root,
        csbm=csbm_args,
        plugins=PLUGIN_ARGS,
    shell:
        "lipnorm data mask {params.plugins} {wildcards.dataset} --pool {wildcards.pool} --rate {wildcards.rate} --seed {wildcards.seed} --out {output.mask} --root {params.root} {params.csbm} > {log} 2>&1"
