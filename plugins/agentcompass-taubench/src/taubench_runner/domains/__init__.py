"""The domains: each module names its agent toolkit (``AGENT_TOOLS``), its user toolkit (``USER_TOOLS`` or
None) and their database files (``DB_FILE``, ``USER_DB_FILE``); the policy is the domain's ``policy.md``.

A domain directory has tau2's layout: ``tasks.json``, ``split_tasks.json``, ``policy.md``, ``db.json`` (and
``user_db.json`` when the user has tools).
"""

from __future__ import annotations

import importlib
import json
import marshal
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from taubench_runner.environment import Environment

DOMAINS = ("mock", "airline", "retail")
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

    @classmethod
    def load(cls, domain: str, directory: str, *, trusted: bool = False) -> DomainData:
        mod = module(domain)
        with open(os.path.join(directory, POLICY_FILE), encoding="utf-8") as fh:
            policy = fh.read()
        with open(os.path.join(directory, mod.DB_FILE), encoding="utf-8") as fh:
            db_text = fh.read()
        user_db_text = None
        if mod.USER_DB_FILE:
            with open(os.path.join(directory, mod.USER_DB_FILE), encoding="utf-8") as fh:
                user_db_text = fh.read()
        return cls(domain, policy, db_text, user_db_text, trusted)

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
        data = json.loads(text)
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
    """Every database file of a domain validated into its records and dumped again (what ``trusted`` loads)."""
    out = {}
    for name, model in db_models(domain).items():
        with open(os.path.join(directory, name), encoding="utf-8") as fh:
            data = json.load(fh)
        out[name] = json.dumps(model.validate(data))
    return out
