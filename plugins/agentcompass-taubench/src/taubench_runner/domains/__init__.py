"""The domains: each module names its agent toolkit (``AGENT_TOOLS``), its user toolkit (``USER_TOOLS`` or
None) and their database files (``DB_FILE``, ``USER_DB_FILE``: JSON or TOML, as upstream ships them); the
policy is the domain's ``policy.md``, or the parts a module names per variant in ``POLICY_VARIANTS`` (the first
one its default) joined by its ``compose_policy``; the task file is ``tasks.json`` unless the module names
another (``TASKS_FILE``).

A domain directory has tau2's layout: the task file, its split file ``split_<task file stem>.json`` (optional:
without one the only split is ``base``, every task), the policy, the databases (``db.json``/``db.toml``, and
``user_db.json``/``user_db.toml`` when the user has tools). The databases validated and normalised (what
``prepare_task`` ships and the runner loads as ``trusted``) are JSON, named :func:`shipped_name`.
"""

from __future__ import annotations

import importlib
import json
import marshal
import os
import tomllib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from taubench_runner.environment import Environment

DOMAINS = ("mock", "airline", "retail", "telecom")
POLICY_FILE = "policy.md"
TASKS_FILE = "tasks.json"
SPLIT_FILE = "split_tasks.json"


def module(domain: str) -> ModuleType:
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; domains: {', '.join(DOMAINS)}")
    return importlib.import_module(f"taubench_runner.domains.{domain}")


def db_files(domain: str) -> list[str]:
    """The database files a domain needs, agent side first."""
    mod = module(domain)
    return [f for f in (mod.DB_FILE, mod.USER_DB_FILE) if f]


def shipped_name(name: str) -> str:
    """The name of a database file once validated and normalised: always JSON (``db.toml`` -> ``db.json``)."""
    stem, _, _ = name.rpartition(".")
    return f"{stem or name}.json"


def policy_variants(domain: str) -> dict[str, tuple[str, ...]]:
    """The domain's policy variants (the first is the default), each the files it is made of."""
    return dict(getattr(module(domain), "POLICY_VARIANTS", {"default": (POLICY_FILE,)}))


def policy_files(domain: str, variant: str | None = None) -> tuple[str, ...]:
    """The files the domain's policy is made of: of one variant (default: the default one), or of all of them
    with ``variant="*"``."""
    variants = policy_variants(domain)
    if variant == "*":
        return tuple(dict.fromkeys(name for files in variants.values() for name in files))
    if variant is None:
        return next(iter(variants.values()))
    if variant not in variants:
        raise ValueError(f"domain {domain!r} has no policy variant {variant!r}; variants: {', '.join(variants)}")
    return variants[variant]


def tasks_file(domain: str) -> str:
    """The domain's default task file (``-b task_set=`` picks another)."""
    return str(getattr(module(domain), "TASKS_FILE", TASKS_FILE))


def split_file(task_file: str) -> str:
    """The split file of a task file, named as upstream's ``load_tasks_split`` names it."""
    return f"split_{task_file.rsplit('.', 1)[0]}.json"


def read_policy(domain: str, directory: str, variant: str | None = None) -> str:
    """The agent's policy, as upstream builds it from the domain's files (``variant``: the default one)."""
    texts = []
    for name in policy_files(domain, variant):
        with open(os.path.join(directory, name), encoding="utf-8") as fh:
            texts.append(fh.read())
    compose = getattr(module(domain), "compose_policy", None)
    return compose(*texts) if compose is not None else texts[0]


def parse_data(text: str, name: str) -> Any:
    """A database file's content: TOML for ``*.toml`` (upstream's format for telecom), JSON otherwise."""
    if name.endswith(".toml"):
        return tomllib.loads(text)
    return json.loads(text)


@dataclass
class DomainData:
    """A domain's policy and its databases as JSON text (parsed afresh for every environment)."""

    domain: str
    policy: str
    db_text: str
    user_db_text: str | None
    #: The databases were validated already (``prepare_task`` ships them normalised): parse only.
    trusted: bool = False
    #: What the evaluator learnt of a task's gold environment (its hashes), by task id: a process that scores
    #: several conversations of one task builds it once.
    gold_cache: dict[str, Any] = field(default_factory=dict)
    #: Hash databases with a cache of serialised entries (see ``environment.dict_hash``).
    cached_hashes: bool = False
    _frozen: dict[str, bytes] = field(default_factory=dict, repr=False)

    #: The database files' format: ``json``, or ``toml`` for upstream's TOML files read as they are (trusted
    #: data is always JSON).
    db_format: str = "json"

    @classmethod
    def load(cls, domain: str, directory: str, *, trusted: bool = False,
             policy_variant: str | None = None) -> DomainData:
        """A domain directory's data. ``trusted``: the databases were validated and normalised already
        (``prepare_task``'s staging, :func:`shipped_name`), so they are JSON and only parsed.
        ``policy_variant``: one of the domain's policy variants (default: the first)."""
        mod = module(domain)
        policy = read_policy(domain, directory, policy_variant)
        names = [mod.DB_FILE, mod.USER_DB_FILE]
        if trusted:
            names = [shipped_name(n) if n else n for n in names]
        texts: list[str | None] = []
        for name in names:
            if not name:
                texts.append(None)
                continue
            with open(os.path.join(directory, name), encoding="utf-8") as fh:
                texts.append(fh.read())
        db_format = "toml" if names[0].endswith(".toml") else "json"
        data = cls(domain, policy, texts[0] or "", texts[1], trusted)
        data.db_format = db_format
        return data

    def environment(self) -> Environment:
        """A fresh environment in the domain's initial state."""
        mod = module(self.domain)
        tools = mod.AGENT_TOOLS(self._db(mod.AGENT_TOOLS, self.db_text))
        user_tools = None
        if mod.USER_TOOLS is not None:
            user_tools = mod.USER_TOOLS(self._db(mod.USER_TOOLS, self.user_db_text))
        env_class = getattr(mod, "ENVIRONMENT", Environment)
        env = env_class(self.domain, self.policy, tools, user_tools)
        env.cached_hashes = self.cached_hashes
        return env

    def _db(self, toolkit: Any, text: str | None) -> dict[str, Any] | None:
        """A fresh database: parsed (and validated unless trusted) the first time, then copied from its
        ``marshal`` bytes, which is faster than parsing the JSON again."""
        if text is None:
            return None
        frozen = self._frozen.get(text)
        if frozen is not None:
            return marshal.loads(frozen)
        data = tomllib.loads(text) if self.db_format == "toml" and not self.trusted else json.loads(text)
        if not self.trusted:
            data = toolkit.db_model().validate(data)
        self._frozen[text] = marshal.dumps(data)
        return data


def db_models(domain: str) -> dict[str, Any]:
    """``{file name: records.Model}`` of a domain's databases."""
    mod = module(domain)
    return {name: toolkit.db_model() for toolkit, name in ((mod.AGENT_TOOLS, mod.DB_FILE),
                                                           (mod.USER_TOOLS, mod.USER_DB_FILE))
            if toolkit is not None and name}


def normalized_db_text(domain: str, directory: str) -> dict[str, str]:
    """Every database file of a domain validated into its records and dumped again (what ``trusted`` loads),
    by its shipped name."""
    out = {}
    for name, model in db_models(domain).items():
        with open(os.path.join(directory, name), encoding="utf-8") as fh:
            data = parse_data(fh.read(), name)
        out[shipped_name(name)] = json.dumps(model.validate(data))
    return out
