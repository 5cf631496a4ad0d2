"""One `lipnorm train` job per grid point of each training experiment, or per seed list
(`train_seeds`: the seeds of a run trained in one process, as config `seed_groups` says).
"""


rule train:
    input:
        ready=dataset_ready,
        mask=run_mask,
    output:
        # lipnorm train renames the whole run directory into place: never half-written.
        summary=f"{RUN_DIR}/summary.json",
        metrics=f"{RUN_DIR}/metrics.parquet",
        gradnorms=f"{RUN_DIR}/gradnorms.parquet",
        outnorms=f"{RUN_DIR}/outnorms.parquet",
        layerstats=f"{RUN_DIR}/layerstats.parquet",
    log:
        RUN_LOG,
    wildcard_constraints:
        run_group=grid.alternatives_regex(SEPARATE_GROUPS or ["(?!)"]),
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


if SEED_GROUPS:

    rule train_seeds:
        input:
            ready=dataset_ready,
            masks=seed_masks,
        output:
            # Each run directory renamed into place whole by `lipnorm train --seeds`.
            **SEED_FILES,
        log:
            SEEDS_LOG,
        wildcard_constraints:
            run_group=grid.alternatives_regex(SEED_GROUPS),
        threads: 1
        resources:
            mem_mb=seeds_mem_mb,
            runtime=seeds_runtime,
        params:
            out=seeds_out,
            mask=seeds_mask,
            seeds=",".join(map(str, SEED_LIST)),
            root=dataset_root,
            csbm=csbm_args,
            settings=seeds_args,
        # `exec`, as in rule train: SIGTERM reaches `lipnorm train`, which saves every
        # run's training state; the retry resumes each.
        shell:
            "exec lipnorm train --dataset {wildcards.dataset} --model {wildcards.model} --depth {wildcards.depth} --alpha {wildcards.alpha} --missing-rate {wildcards.rate} --seeds {params.seeds} --mask {params.mask} --data-root {params.root} {params.csbm} {params.settings} --threads {threads} --out {params.out} > {log} 2>&1"
