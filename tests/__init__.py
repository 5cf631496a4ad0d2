"""lipnorm's tests: one folder per package of src/lipnorm, repository-level checks in repository/.

A package, so that a test module imports shared helpers and other tests' fixtures by their
full name (`tests.synthetic_runs`, `tests.nn.test_gat`) wherever it stands.
"""
