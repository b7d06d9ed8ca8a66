"""The plugin system: a plugin-manager factory, guarded entry-point loading, and the registries.

Every plugin, the built-ins included, arrives through the ``agentcompass`` entry-point group. Each entry
point is loaded, registered and asked for its registrations inside its own ``try``: a broken plugin is
recorded with its error and unregistered, and every other plugin keeps working.

``AGENTCOMPASS_LOAD_PLUGINS`` (comma-separated entry-point names) restricts loading to the plugins it
names; ``builtin`` is always loaded, since the runtime needs the ``none`` harness and ``local`` environment.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from agentcompass import hookspecs
from agentcompass.errors import PluginError, describe, unknown_name
from agentcompass.runtime.harness import AttemptLimits
from agentcompass.runtime.logs import get_logger

if TYPE_CHECKING:
    import click

ENTRY_POINT_GROUP = "agentcompass"
LOAD_PLUGINS_ENV = "AGENTCOMPASS_LOAD_PLUGINS"
ALWAYS_LOADED = frozenset({"builtin"})

#: Registration hook of each kind of thing a plugin can provide.
REGISTRATION_HOOKS: dict[str, str] = {
    "benchmark": "register_benchmarks",
    "harness": "register_harnesses",
    "environment": "register_environments",
    "metric_contract": "register_metric_contracts",
    "model": "register_models",
    "executor": "register_executors",
    "scanner": "register_scanners",
}

#: Observer hooks: called through pluggy; an implementation that raises is logged and skipped.
OBSERVER_HOOKS = frozenset({"agentcompass_run_started", "agentcompass_task_event", "agentcompass_model_call",
                            "agentcompass_result_recorded", "agentcompass_run_warning", "agentcompass_run_signal",
                            "agentcompass_run_finished", "agentcompass_run_control"})
#: A plugin object may define ``agentcompass_observing() -> bool``: asked when the plugin is registered, a false
#: answer leaves its observer hooks unregistered, so an observer that is installed but switched off (``otel``
#: without ``--otel``) costs the runs nothing, not even a call per event. :meth:`PluginHost.refresh_observers`
#: asks again (``run --otel`` switches tracing on after the plugins were loaded).
OBSERVING_ATTR = "agentcompass_observing"


def make_plugin_manager() -> pluggy.PluginManager:
    """A fresh plugin manager with agentcompass's hookspecs and no plugin."""
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


@attrs.define
class Registration:
    kind: str
    name: str
    factory: Callable[..., Any]
    plugin: str


@attrs.define
class PluginRecord:
    """What ``plugins list`` shows of one plugin."""

    name: str
    version: str | None = None
    distribution: str | None = None
    module: str | None = None
    loaded: bool = False
    hooks: list[str] = attrs.field(factory=list)
    registers: dict[str, list[str]] = attrs.field(factory=dict)
    error: str | None = None
    #: Versions of what a plugin registers, by registered name, where its factory states one (a factory's
    #: ``version`` attribute: e.g. the pinned version of an installed agent's harness).
    versions: dict[str, str] = attrs.field(factory=dict)
    #: The default limits of each attempt of the harnesses it registers that have some
    #: (``BaseHarness.default_limits``), in words: ``{"codex": "200 calls, 4,000,000 tokens per attempt"}``.
    limits: dict[str, str] = attrs.field(factory=dict)


def _guarded(function: Callable[..., Any], plugin: str, hook: str) -> Callable[..., Any]:
    """An observer implementation that logs its own failure instead of raising it into the hook call."""

    @functools.wraps(function)
    def observer(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            get_logger().warning("plugin.observer_failed", plugin=plugin, hook=hook, error=describe(exc))
            return None

    return observer


class _Registered:
    """A plugin as it is registered with pluggy: its hook implementations, the observers among them wrapped to
    log their own failures (:func:`_guarded`); any other attribute is the plugin's own. Wrapping before
    registration leaves pluggy's ``HookImpl`` untouched, and ordering markers and wrappers work as declared (the
    markers travel with the wrapped function)."""

    def __init__(self, plugin: object, name: str, pm: pluggy.PluginManager) -> None:
        self.__dict__["_plugin"] = plugin
        marker = f"{hookspecs.PROJECT_NAME}_impl"
        observing = getattr(plugin, OBSERVING_ATTR, None)
        observes = bool(observing()) if callable(observing) else True
        for attr in dir(plugin):
            opts = pm.parse_hookimpl_opts(plugin, attr)
            if opts is None:
                continue
            function = getattr(plugin, attr)
            hook = opts.get("specname") or attr
            if hook in OBSERVER_HOOKS and not observes:
                continue
            if hook in OBSERVER_HOOKS and not (opts.get("wrapper") or opts.get("hookwrapper")):
                function = _guarded(function, name, hook)
                setattr(function, marker, dict(opts))
            self.__dict__[attr] = function

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.__dict__["_plugin"], attr)

    def __repr__(self) -> str:
        return f"<agentcompass plugin {self.__dict__['_plugin']!r}>"


@attrs.define
class PluginHost:
    """A plugin manager plus what its plugins registered. Build one with :func:`load_plugins`."""

    pm: pluggy.PluginManager = attrs.field(factory=make_plugin_manager)
    records: dict[str, PluginRecord] = attrs.field(factory=dict)
    registry: dict[str, dict[str, Registration]] = attrs.field(
        factory=lambda: {kind: {} for kind in REGISTRATION_HOOKS}
    )
    #: The plugins ``$AGENTCOMPASS_LOAD_PLUGINS`` (or ``only``) limited loading to, and those of its names no
    #: installed plugin has (``None``: no limit).
    selection: frozenset[str] | None = None
    unknown_selected: tuple[str, ...] = ()

    def selection_note(self) -> str:
        """What the loading limit did, for messages (empty without one)."""
        if self.selection is None:
            return ""
        note = f"${LOAD_PLUGINS_ENV} limits loading to: {', '.join(sorted(self.selection))}"
        if self.unknown_selected:
            note += f" (no installed plugin is called {', '.join(self.unknown_selected)})"
        return note + "."

    # -- loading -------------------------------------------------------------------------------------

    def add_plugin(self, plugin: object, name: str, record: PluginRecord | None = None) -> PluginRecord:
        """Register one plugin object (a module or an instance with hookimpls) and collect what it
        registers. Failures are recorded on the returned record, never raised."""
        record = record or PluginRecord(name=name, module=getattr(plugin, "__name__", None))
        self.records[name] = record
        try:
            plugin = _Registered(plugin, name, self.pm)
            self.pm.register(plugin, name=name)
        except Exception as exc:  # a name clash or a hookimpl that does not match its spec
            record.error = f"registration failed: {describe(exc)}"
            return record
        try:
            self.pm.check_pending()
            registrations = self._collect_registrations(plugin, name)
        except Exception as exc:
            self.pm.unregister(name=name)
            record.error = describe(exc)
            return record
        for reg in registrations:
            self.registry[reg.kind][reg.name] = reg
        record.loaded = True
        record.hooks = self._hooks_of(plugin)
        record.registers = {
            kind: sorted(r.name for r in registrations if r.kind == kind)
            for kind in REGISTRATION_HOOKS
            if any(r.kind == kind for r in registrations)
        }
        record.versions = {r.name: str(v) for r in registrations
                           if isinstance(v := getattr(r.factory, "version", None), str) and v}
        record.limits = {r.name: limits.describe() for r in registrations if r.kind == "harness"
                         and isinstance(limits := getattr(r.factory, "default_limits", None), AttemptLimits)
                         and (limits.max_calls or limits.max_tokens)}
        return record

    def _hooks_of(self, plugin: object) -> list[str]:
        return sorted(caller.name for caller in (self.pm.get_hookcallers(plugin) or []) if caller.name != "__init__")

    def refresh_observers(self, name: str) -> bool:
        """Register plugin ``name`` anew so that its ``agentcompass_observing`` (:data:`OBSERVING_ATTR`) is asked
        again, keeping what it registered; whether it now observes (``False`` also when no such plugin is
        loaded). Call it between runs, not during one."""
        current = self.pm.get_plugin(name)
        if current is None:
            return False
        plugin = current.__dict__["_plugin"] if isinstance(current, _Registered) else current
        self.pm.unregister(name=name)
        registered = _Registered(plugin, name, self.pm)
        self.pm.register(registered, name=name)
        hooks = self._hooks_of(registered)
        record = self.records.get(name)
        if record is not None:
            record.hooks = hooks
        return any(hook in OBSERVER_HOOKS for hook in hooks)

    def remove_plugin(self, name: str) -> None:
        """Unregister a plugin and forget what it registered."""
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        for regs in self.registry.values():
            for key in [k for k, r in regs.items() if r.plugin == name]:
                del regs[key]
        self.records.pop(name, None)

    def _only(self, plugin: object, hook_name: str) -> Any:
        """A caller of ``hook_name`` that reaches ``plugin``'s implementations alone, through pluggy."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        return self.pm.subset_hook_caller(hook_name, remove_plugins=others)

    def _collect_registrations(self, plugin: object, plugin_name: str) -> list[Registration]:
        collected: list[Registration] = []
        for kind, hook_name in REGISTRATION_HOOKS.items():
            if not any(impl.plugin is plugin for impl in getattr(self.pm.hook, hook_name).get_hookimpls()):
                continue

            def register(name: str, factory: Callable[..., Any], _kind: str = kind) -> None:
                if not isinstance(name, str) or not name:
                    raise PluginError(f"{_kind} name must be a non-empty string, got {name!r}")
                if not callable(factory):
                    raise PluginError(f"{_kind} {name!r}: factory {factory!r} is not callable")
                clash = self.registry[_kind].get(name) or next(
                    (r for r in collected if r.kind == _kind and r.name == name), None
                )
                if clash is not None:
                    raise PluginError(
                        f"{_kind} {name!r} is registered by both plugin {clash.plugin!r} and plugin {plugin_name!r}"
                    )
                collected.append(Registration(_kind, name, factory, plugin_name))

            self._only(plugin, hook_name)(register=register)
        return collected

    def add_commands(self, group: click.Group) -> None:
        """Let every loaded plugin add its commands to ``group`` (``register_commands``), each on its own: a
        plugin whose hook raises, or that takes a command name already in use, is recorded and its commands
        are left out."""
        for name, plugin in list(self.pm.list_name_plugin()):
            hookimpls = self.pm.hook.register_commands.get_hookimpls()
            if plugin is None or not any(impl.plugin is plugin for impl in hookimpls):
                continue
            record = self.records.get(name)
            before = dict(group.commands)
            try:
                self._only(plugin, "register_commands")(cli=group)
                replaced = [c for c in before if group.commands.get(c) is not before[c]]
                if replaced:
                    raise PluginError(f"command {replaced[0]!r} is already provided by agentcompass or another plugin")
            except Exception as exc:
                group.commands.clear()
                group.commands.update(before)
                if record is not None:
                    record.error = f"register_commands failed: {describe(exc)}"
                continue
            if record is not None:
                added = sorted(set(group.commands) - set(before))
                if added:
                    record.registers["command"] = added

    # -- lookup --------------------------------------------------------------------------------------

    def names(self, kind: str) -> list[str]:
        return sorted(self.registry[kind])

    def factory(self, kind: str, name: str) -> Callable[..., Any]:
        """The factory registered under ``name``; an unknown name is a UsageError listing what exists."""
        try:
            return self.registry[kind][name].factory
        except KeyError:
            hint = ""
            broken = [r.name for r in self.records.values() if r.error]
            if broken:
                hint = f"Plugins that failed to load: {', '.join(sorted(broken))} (see 'agentcompass plugins list')."
            if self.selection is not None:
                hint = f"{hint} {self.selection_note()}".strip()
            raise unknown_name(kind.replace("_", " "), name, self.registry[kind], hint) from None

    def plugin_of(self, kind: str, name: str) -> PluginRecord | None:
        reg = self.registry[kind].get(name)
        return self.records.get(reg.plugin) if reg else None

    def notify(self, hook_name: str, **kwargs: Any) -> None:
        """Call an observer hook through pluggy. A failing observer is logged and the others still run (each
        implementation is guarded when its plugin is added); a failing wrapper is logged too."""
        try:
            getattr(self.pm.hook, hook_name)(**kwargs)
        except Exception as exc:
            get_logger().warning("plugin.observer_failed", hook=hook_name, error=describe(exc))


def _selected(names: str | None) -> set[str] | None:
    if names is None:
        return None
    return {n.strip() for n in names.split(",") if n.strip()} | ALWAYS_LOADED


def load_plugins(
    entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    *,
    only: str | None = None,
    include_skipped: bool = False,
) -> PluginHost:
    """Load plugins from the ``agentcompass`` entry-point group into a new :class:`PluginHost`.

    :param entry_points: entry points to load (default: the installed ones).
    :param only: comma-separated names to load (default: ``$AGENTCOMPASS_LOAD_PLUGINS``, else all).
    :param include_skipped: keep records of entry points that ``only`` excluded.
    """
    host = PluginHost()
    if entry_points is None:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    selected = _selected(only if only is not None else os.environ.get(LOAD_PLUGINS_ENV))
    seen: set[str] = set()
    for ep in sorted(entry_points, key=lambda e: (e.name not in ALWAYS_LOADED, e.name)):
        dist = getattr(ep, "dist", None)
        record = PluginRecord(
            name=ep.name,
            version=dist.version if dist is not None else None,
            distribution=dist.name if dist is not None else None,
            module=ep.value,
        )
        if ep.name in seen:
            record.error = f"another installed plugin already uses the entry-point name {ep.name!r}"
            host.records[f"{ep.name} ({record.distribution})"] = record
            continue
        seen.add(ep.name)
        if selected is not None and ep.name not in selected:
            if include_skipped:
                record.error = None
                host.records[ep.name] = record
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            record.error = f"import failed: {describe(exc)}"
            host.records[ep.name] = record
            continue
        host.add_plugin(plugin, ep.name, record)
    if selected is not None:
        host.selection = frozenset(selected)
        host.unknown_selected = tuple(sorted(selected - seen))
    return host
