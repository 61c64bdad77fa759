"""The key store's benchmark harness: `python -m bench <what>` (or `bench/run <what>`; the list
in bench/__main__.py); see docs/benchmarks.md.

It starts the service itself on SQLite and on PostgreSQL, drives load from separate
processes on loopback (wrk; bench.rate for constant rates), measures the database's own limit
for the same statements (pgbench; a Python loop on SQLite), and reports every figure as the
median of several runs and as a ratio to references measured in the same run.
"""
