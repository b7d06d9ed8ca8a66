"""The checks, defined once: what a developer runs and what CI (``.ci/run``) runs. Everything runs through uv in
the project's own environment.

    uv run nox                                    # lint, typecheck, docs, tests (the default pytest run)
    uv run nox -s lint typecheck                  # ruff and mypy only
    uv run nox -s docs                            # the documentation site, warnings as errors
    uv run nox -s tests -- --all-tests -n 0       # arguments after `--` go to pytest
"""

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["lint", "typecheck", "docs", "tests"]

#: What mypy checks (pyproject's [tool.mypy] holds its settings): the core and every plugin.
TYPED = ("agentcompass_core/src", "plugins")


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite; arguments after ``--`` go to pytest (docker tests need an engine: .ci/docker-up.sh)."""
    session.run("uv", "run", "pytest", *session.posargs, external=True)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    session.run("uv", "run", "ruff", "check", ".", external=True)


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over the core and the plugins."""
    session.run("uv", "run", "mypy", *TYPED, external=True)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml, docs/) built into site/ with warnings as errors, with the ``docs``
    dependency group. It takes no arguments: those after ``--`` are the tests session's (CI passes pytest's)."""
    session.run("uv", "run", "--group", "docs", "mkdocs", "build", "--strict", external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """Print the performance figures (see bench/)."""
    session.run("uv", "run", "python", "bench/overhead.py", *session.posargs, external=True)
