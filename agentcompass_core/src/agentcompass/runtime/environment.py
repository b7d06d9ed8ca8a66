"""Environments: where task code runs.

An *environment provider* (registered with ``register_environments``) opens one :class:`EnvironmentSession`
per task attempt. The runtime owns every session: benchmarks and harnesses use the session they are given
and never open or close one themselves.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentcompass.runtime.types import EnvironmentSpec, ExecResult, NetworkPolicy


@dataclass(frozen=True)
class PruneReport:
    """What :meth:`EnvironmentProvider.prune` did: how many things it removed, and what it left because a live
    process owns it (or it cannot tell who does), one line each saying what and why."""

    removed: int
    skipped: tuple[str, ...] = ()


#: Bytes of stdout, and of stderr, an ``exec`` keeps; output past it is dropped with a note at the end.
OUTPUT_LIMIT = 8 * 1024 * 1024


class EnvironmentSession(abc.ABC):
    """A live environment for one task attempt.

    ``exec`` runs in :attr:`workdir` unless ``cwd`` is given; every relative path resolves against
    :attr:`workdir`. Each ``exec`` sees the session's base environment (which carries the agent model's
    ``OPENAI_*`` variables) updated with ``env``.
    """

    #: The working directory inside the environment.
    workdir: str

    @abc.abstractmethod
    async def exec(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run ``argv`` (no shell) and wait for it.

        :param timeout: seconds; on expiry the whole process tree is killed and ``timed_out`` is set.
        :param env: variables added to the session's base environment for this call.
        :param cwd: directory to run in, relative to :attr:`workdir` or absolute.
        """

    async def set_network(self, policy: NetworkPolicy) -> None:
        """Switch what the session may reach from now on (a benchmark's per-phase network policy: the agent's,
        then the verifier's). An environment that cannot raises :class:`NotImplementedError` (the default)."""
        raise NotImplementedError(f"{type(self).__name__} cannot change its network")

    @abc.abstractmethod
    async def read_bytes(self, path: str) -> bytes:
        """Read a file of the environment."""

    @abc.abstractmethod
    async def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file of the environment, creating parent directories."""

    async def read_text(self, path: str) -> str:
        """Read a UTF-8 text file of the environment."""
        return (await self.read_bytes(path)).decode("utf-8")

    async def write_text(self, path: str, text: str) -> None:
        """Write a UTF-8 text file of the environment, creating parent directories."""
        await self.write_bytes(path, text.encode("utf-8"))

    @abc.abstractmethod
    async def upload(self, local_path: str | Path, path: str) -> None:
        """Copy a host file or directory tree into the environment at ``path``."""

    @abc.abstractmethod
    async def download(self, path: str, local_path: str | Path) -> None:
        """Copy a file or directory tree of the environment to ``local_path`` on the host."""

    def shell_command(self) -> list[str] | None:
        """A host command that opens an interactive shell in this environment, in :attr:`workdir`, on the
        terminal it is started on (the ``human`` harness runs it in a pseudo-terminal). ``None`` (the default):
        this environment offers none."""
        return None


@dataclass(frozen=True)
class EnvironmentDemand:
    """What a run will ask of its environment provider, for providers that prepare ahead of the tasks (a warm
    pool of started containers).

    :param opens: the spec of every attempt the run will start, in the order the attempts are queued (each
        task once per trial; retries are not foreseen). The same spec object may appear many times.
    :param concurrency: attempts that run at once (``--concurrency``).
    :param max_environments: live environments at once (``--max-environments``), or ``None`` for no bound
        beyond ``concurrency``.
    """

    opens: tuple[EnvironmentSpec, ...]
    concurrency: int
    max_environments: int | None = None


class EnvironmentProvider(abc.ABC):
    """Opens and closes sessions of one kind of environment (``local``, ``docker``, ...).

    A provider lives for one run. ``setup`` runs once before any task takes a concurrency slot (check the
    engine, start building images); ``ready`` before each open (wait for that open's image); ``teardown`` runs
    once at the end, on every path.
    """

    name: str = ""

    async def setup(self, specs: Iterable[EnvironmentSpec], *, run_id: str) -> None:  # noqa: B027
        """Prepare for a run that will open sessions with these specs (each distinct spec once). Raise to stop
        the run early."""

    async def plan(self, demand: EnvironmentDemand) -> None:  # noqa: B027
        """Called once after :meth:`setup`, before any attempt opens a session: what the run will ask for, in
        order. A provider may start environments ahead of the tasks that will take them; whatever it starts
        and no task takes, it removes in :meth:`teardown`. The default does nothing."""

    async def ready(self, spec: EnvironmentSpec) -> None:  # noqa: B027
        """Wait until a session of ``spec`` can open without a long wait: its image built, say. Called before
        every :meth:`open`, outside the ``environment`` phase's timeout (so a long build does not count as a
        slow start) and before the attempt takes an environment slot (``--max-environments``); the provider
        bounds what it waits for itself (a build timeout). Raising here fails the attempt as a failed open
        does. The default returns at once: :meth:`setup` prepared everything."""

    @abc.abstractmethod
    async def open(
        self,
        spec: EnvironmentSpec,
        *,
        run_id: str,
        task_id: str,
        base_env: Mapping[str, str],
    ) -> EnvironmentSession:
        """Start a session for one task attempt. Raise :class:`~agentcompass.errors.InfrastructureError`
        for a failure worth a retry."""

    @abc.abstractmethod
    async def close(self, session: EnvironmentSession) -> None:
        """Stop a session and release everything it held. Must be safe to call once per session on any
        path, including after a failed or cancelled task."""

    async def teardown(self) -> None:  # noqa: B027
        """Release run-level resources (called once, on every path)."""

    async def prune(self, run_id: str | None = None) -> int | PruneReport:
        """Remove what runs left behind (e.g. after SIGKILL): only ``run_id``'s, or every run's, never what a
        process that still runs owns. Returns how many things were removed, or a :class:`PruneReport` that also
        names what was left."""
        return 0

    def gateway_address(self, *, host: str, port: int, unix_socket: str) -> tuple[str, Mapping[str, str]]:
        """How code inside this environment reaches the run's model gateway.

        The gateway listens on ``host:port`` (loopback TCP) and on the Unix socket ``unix_socket``. Return the
        base URL for ``OPENAI_BASE_URL`` (ending in ``/v1``) and any extra variables for the session's base
        environment. The default suits environments that share the host's network namespace; an isolated
        environment (a container with no network) mounts the socket and serves it inside instead.
        """
        return f"http://{host}:{port}/v1", {}
