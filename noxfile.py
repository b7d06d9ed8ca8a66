"""Developer sessions. Everything runs through uv in the project's own environment.

    uv run nox -s tests lint typecheck
"""

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["lint", "typecheck", "tests"]


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (docker tests need an engine: .ci/docker-up.sh)."""
    session.run("uv", "run", "pytest", *session.posargs, external=True)


@nox.session
def lint(session: nox.Session) -> None:
    session.run("uv", "run", "ruff", "check", ".", external=True)


@nox.session
def typecheck(session: nox.Session) -> None:
    session.run("uv", "run", "mypy", "agentcompass_core/src", "plugins", external=True)


@nox.session
def bench(session: nox.Session) -> None:
    """Print the performance figures (see bench/)."""
    session.run("uv", "run", "python", "bench/overhead.py", *session.posargs, external=True)
