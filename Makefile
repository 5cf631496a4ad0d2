# The README's two commands: `make run` and `make test`. Both set up .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SNAKEMAKE_ARGS ?=

.PHONY: run test report docs setup system-deps clean-venv

setup: $(STAMP)

# Re-install only when the pins or the package metadata change. The venv's own
# pip.conf applies constraints.txt to every later `pip install` in it as well.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	printf '[install]\nconstraint = %s\n' "$(abspath constraints.txt)" > $(VENV)/pip.conf
	$(BIN)/python -m pip install --quiet --upgrade "pip<25" -c constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[all]"
	touch $@

# Debian packages for the SLURM and LaTeX tests (quick when present). Without root it
# prints the missing ones and the command that installs them, and the suite still runs.
system-deps:
	bash scripts/install-system-deps.sh

# The same entry as in a user's own project (`lipnorm workflow`, docs/workflow.md): the
# installed workflow on config.yaml with profiles/default; SNAKEMAKE_ARGS go after it
# (`--configfile FILE`, `--profile slurm`, or any of Snakemake's).
run: setup
	$(BIN)/lipnorm workflow $(SNAKEMAKE_ARGS)

# The HTML report of the finished workflow (run `make run` first).
report: setup
	$(BIN)/lipnorm workflow --report results/report.html $(SNAKEMAKE_ARGS)

# The documentation site (mkdocs.yml) in site/; --strict: a broken link or a docstring
# that no longer matches its function is an error. NO_MKDOCS_2_WARNING silences
# mkdocs-material's end-of-life banner.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test: setup system-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)
