"""``hookspecs.py`` matches the code: every hook is documented argument by argument, and each is either a
registration hook, ``register_commands``, or an observer hook the plugin host guards."""

from __future__ import annotations

import inspect

from agentcompass import hookspecs
from agentcompass.plugins import OBSERVER_HOOKS, REGISTRATION_HOOKS, make_plugin_manager


def specs() -> dict[str, object]:
    return {name: f for name, f in vars(hookspecs).items()
            if inspect.isfunction(f) and hasattr(f, f"{hookspecs.PROJECT_NAME}_spec")}


def test_every_hook_is_a_registration_hook_the_commands_hook_or_a_guarded_observer():
    kinds = set(REGISTRATION_HOOKS.values()) | {"register_commands"} | set(OBSERVER_HOOKS)
    assert set(specs()) == kinds
    assert not set(REGISTRATION_HOOKS.values()) & set(OBSERVER_HOOKS)
    assert {name for name in specs() if name.startswith("agentcompass_")} == set(OBSERVER_HOOKS)


def test_every_hook_documents_each_argument_and_what_it_returns():
    for name, function in specs().items():
        doc = inspect.getdoc(function) or ""
        for arg in inspect.signature(function).parameters:
            assert f":param {arg}:" in doc, f"{name}: argument {arg!r} is not documented"
        assert ":return:" in doc, f"{name}: the return value is not documented"


def test_the_plugin_manager_knows_every_hook():
    pm = make_plugin_manager()
    assert all(getattr(pm.hook, name).has_spec() for name in specs())
