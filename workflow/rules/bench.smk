"""`snakemake bench`: the cost of LipschitzNorm next to DGL and PyG (not in `rule all`)."""


rule bench:
    input:
        # Cora is one of the benchmark graphs.
        cora=ancient(DATASET_READY.format(dataset="cora")),
    output:
        # lipnorm bench replaces the whole folder atomically.
        directory(f"{RESULTS}/bench"),
    log:
        f"{RESULTS}/logs/bench.log",
    threads: 1
    params:
        root=dataset_root,
    shell:
        "lipnorm bench --threads {threads} --data-root {params.root} --out {output} > {log} 2>&1"
