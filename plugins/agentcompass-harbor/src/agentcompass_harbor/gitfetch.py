"""Directories of git repositories at pinned commits, fetched with ``git`` and cached by content.

A directory ``path`` of ``url`` at ``commit`` is fetched once: an empty repository, a sparse checkout of the
paths asked for (``--no-cone``), one shallow ``git fetch`` of the commit (``--filter=blob:none`` where the
server allows it), a checkout. Its copy is kept under the cache as ``trees/<tree id>`` — git's own hash of the
directory's content, so identical directories at different commits or URLs share one copy — and
``refs/<hash of url, commit, path>`` names that tree. A pinned commit is immutable: once cached, it is used
without any network. A branch or tag is resolved with ``git ls-remote`` each time, the last commit it resolved
to being used (said in the log) when the repository cannot be reached.

Cache: ``$XDG_CACHE_HOME/agentcompass/harbor`` (``~/.cache/agentcompass/harbor`` without it).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentcompass.runtime.logs import get_logger

log = get_logger(plugin="harbor")

GIT_TIMEOUT = 600.0
_COMMIT = re.compile(r"^[0-9a-fA-F]{40}$|^[0-9a-fA-F]{64}$")


class FetchError(RuntimeError):
    """A repository, commit or path cannot be had."""


def cache_root() -> Path:
    """Where fetched task directories are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentcompass" / "harbor"


def is_commit(rev: str | None) -> bool:
    return bool(rev and _COMMIT.match(rev))


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _git(args: Sequence[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT, check=False)
    except FileNotFoundError:
        raise FetchError("git is not installed: fetching a dataset needs it on the PATH") from None
    except subprocess.TimeoutExpired:
        raise FetchError(f"git {' '.join(args[:2])} took more than {GIT_TIMEOUT:g} s") from None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.startswith("warning: filtering not recognized")]
    return lines[-1] if lines else "(no output)"


@dataclass(frozen=True)
class Wanted:
    """A directory ``path`` (``""``: the whole repository) of ``url`` at ``commit`` (a full commit id)."""

    url: str
    commit: str
    path: str


class TreeCache:
    """The content cache of fetched directories."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_root()

    def _ref(self, wanted: Wanted) -> Path:
        return self.root / "refs" / _key(wanted.url, wanted.commit, wanted.path)

    def cached(self, wanted: Wanted) -> Path | None:
        """The cached copy of ``wanted``, when there is one."""
        ref = self._ref(wanted)
        try:
            tree = ref.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        directory = self.root / "trees" / tree
        return directory if tree and directory.is_dir() else None

    def resolve(self, url: str, rev: str | None) -> str:
        """The commit ``rev`` (a branch, a tag, ``None``: ``HEAD``) of ``url`` names now; offline, the one it
        named when last resolved here."""
        if is_commit(rev):
            assert rev is not None
            return rev.lower()
        name = rev or "HEAD"
        remembered = self.root / "heads" / _key(url, name)
        listed = _git(["ls-remote", url, name, f"refs/tags/{name}^{{}}"])
        if listed.returncode == 0:
            found = _pick(listed.stdout, name)
            if found is None:
                raise FetchError(f"{url} has no branch or tag {name!r} (a commit must be a full 40-character id)")
            remembered.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(remembered, found)
            return found
        if remembered.is_file():
            commit = remembered.read_text(encoding="utf-8").strip()
            log.warning("harbor.git_offline", url=url, rev=name, commit=commit, error=_last_line(listed.stderr))
            return commit
        raise FetchError(f"cannot reach {url} to resolve {name!r}: {_last_line(listed.stderr)}")

    def fetch(self, wanted: Sequence[Wanted]) -> dict[Wanted, Path]:
        """Every directory of ``wanted`` in the cache (fetched when missing), by what was asked for."""
        out: dict[Wanted, Path] = {}
        missing: dict[tuple[str, str], list[Wanted]] = {}
        for w in wanted:
            hit = self.cached(w)
            if hit is not None:
                out[w] = hit
            else:
                missing.setdefault((w.url, w.commit), []).append(w)
        for (url, commit), group in missing.items():
            out.update(self._fetch_commit(url, commit, group))
        return out

    def _fetch_commit(self, url: str, commit: str, group: list[Wanted]) -> dict[Wanted, Path]:
        log.info("harbor.git_fetch", url=url, commit=commit, paths=len(group))
        self.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="fetch-", dir=self.root) as scratch:
            repo = Path(scratch) / "repo"
            for args in (["init", "-q", str(repo)], ["-C", str(repo), "remote", "add", "origin", url]):
                done = _git(args)
                if done.returncode != 0:
                    raise FetchError(f"git {args[0]} failed: {_last_line(done.stderr)}")
            if all(w.path for w in group):
                patterns = sorted({f"/{w.path.strip('/')}/" for w in group})
                done = _git(["-C", str(repo), "sparse-checkout", "set", "--no-cone", *patterns])
                if done.returncode != 0:
                    raise FetchError(f"git sparse-checkout failed: {_last_line(done.stderr)}")
            fetched = _git(["-C", str(repo), "fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", commit])
            if fetched.returncode != 0:
                reachable = _git(["ls-remote", "--heads", url])
                if reachable.returncode == 0:
                    raise FetchError(f"commit {commit} does not exist in {url} "
                                     f"(git fetch: {_last_line(fetched.stderr)})")
                raise FetchError(f"cannot fetch {url} (needed for commit {commit}): {_last_line(fetched.stderr)}")
            checkout = _git(["-C", str(repo), "checkout", "-q", "FETCH_HEAD"])
            if checkout.returncode != 0:
                raise FetchError(f"cannot check out commit {commit} of {url}: {_last_line(checkout.stderr)}")
            out = {}
            for w in group:
                spec = f"{commit}:{w.path.strip('/')}" if w.path.strip("/") else f"{commit}^{{tree}}"
                tree = _git(["-C", str(repo), "rev-parse", "--verify", "-q", spec])
                kind = _git(["-C", str(repo), "cat-file", "-t", tree.stdout.strip()]) if tree.returncode == 0 \
                    else None
                if kind is None or kind.stdout.strip() != "tree":
                    raise FetchError(f"{url} has no directory {w.path!r} at commit {commit}")
                out[w] = self._keep(repo / w.path.strip("/"), tree.stdout.strip(), w)
            return out

    def _keep(self, source: Path, tree: str, wanted: Wanted) -> Path:
        target = self.root / "trees" / tree
        if not target.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{tree}-", dir=target.parent))
            shutil.copytree(source, staging / "t", symlinks=True, ignore=shutil.ignore_patterns(".git"))
            try:
                (staging / "t").rename(target)
            except OSError:  # another run kept it first: the same content
                pass
            shutil.rmtree(staging, ignore_errors=True)
        ref = self._ref(wanted)
        ref.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(ref, tree)
        return target


def _pick(listing: str, name: str) -> str | None:
    """The commit of ``name`` in ``git ls-remote`` output: a peeled tag, else the ref itself."""
    refs: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, ref = line.partition("\t")
        refs[ref.strip()] = sha.strip()
    for ref in (f"refs/tags/{name}^{{}}", name, f"refs/heads/{name}", f"refs/tags/{name}"):
        if ref in refs:
            return refs[ref]
    return None


def _write_atomic(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(text, encoding="utf-8")
    scratch.replace(path)
