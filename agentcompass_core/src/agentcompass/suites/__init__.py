"""Suites: one file runs a grid of benchmarks x harnesses x models, each cell an ordinary run directory.

* :mod:`.suite_file` — the suite file (``[defaults]``, ``[[run]]``, ``[matrix]``) turned into named cells;
* :mod:`.cell_state` — the suite directory: ``suite.json`` (the resolved cells), each cell's state and lock;
* :mod:`.scheduler` — runs the cells together in one process under one shared capacity;
* :mod:`.leaderboard` — per benchmark, every cell's figures and its paired difference against a baseline.

``agentcompass suite run|show`` (:mod:`agentcompass.cli.suite`) is a thin layer over these.
"""
