"""What keeps a `lipnorm` process short: no network threads, no exit-time collection.

The times themselves are measured by benchmarks/startup.py, not here.
"""

import subprocess
import sys


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_importing_dgl_after_lipnorm_starts_no_version_check_threads():
    # Without lipnorm first, `import dgl` imports ogb, whose `outdated` check starts two
    # non-daemon threads that the interpreter waits for at exit.
    out = run_python(
        "import lipnorm, dgl, sys, threading;"
        "print(threading.active_count(), sys.modules['outdated'])"
    )
    assert out == "1 None"


def test_ogb_still_imports_without_its_version_check():
    out = run_python(
        "import lipnorm; from ogb.nodeproppred import Evaluator;"
        "print(Evaluator('ogbn-arxiv').num_tasks)"
    )
    assert out == "1"


def test_cli_freezes_the_heap_when_a_command_returns(capsys):
    import gc

    from lipnorm import cli

    gc.unfreeze()
    spec = "nodes=30,classes=2,avg_degree=3,feature_dim=4"
    assert cli.main(["data", "info", "csbm", "--csbm", spec]) == 0
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    assert "nodes       30" in capsys.readouterr().out
