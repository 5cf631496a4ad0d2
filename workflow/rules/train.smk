"""One `lipnorm train` job per grid point of each training experiment."""


rule train:
    input:
        ready=dataset_ready,
        mask=MASK,
    output:
        # lipnorm train renames the whole run directory into place: never half-written.
        summary=f"{RUN_DIR}/summary.json",
        metrics=f"{RUN_DIR}/metrics.parquet",
        gradnorms=f"{RUN_DIR}/gradnorms.parquet",
        outnorms=f"{RUN_DIR}/outnorms.parquet",
        layerstats=f"{RUN_DIR}/layerstats.parquet",
    log:
        RUN_LOG,
    # Threads are set per machine in profiles/; memory and runtime come from the plan
    # of each job (lipnorm.plan, common.smk), growing with each retry.
    threads: 1
    resources:
        mem_mb=train_mem_mb,
        runtime=train_runtime,
    params:
        run_dir=lambda wildcards, output: os.path.dirname(output.summary),
        root=dataset_root,
        csbm=csbm_args,
        settings=train_args,
    # `exec`: SIGTERM from SLURM (time limit, preemption, `--signal`) reaches `lipnorm
    # train` itself, not a shell that would die and leave it orphaned, so it saves its
    # training state and exits 143; the retry finds that state beside the run directory
    # (<run_dir>.state.pt, not a declared output, so Snakemake keeps it) and resumes.
    shell:
        "exec lipnorm train --dataset {wildcards.dataset} --model {wildcards.model} --depth {wildcards.depth} --alpha {wildcards.alpha} --missing-rate {wildcards.rate} --seed {wildcards.seed} --mask {input.mask} --data-root {params.root} {params.csbm} {params.settings} --threads {threads} --out {params.run_dir} > {log} 2>&1"
