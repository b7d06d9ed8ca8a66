"""The plugin system: guarded loading, duplicate names, broken plugins reported, built-ins via entry points."""

from __future__ import annotations

import importlib.metadata
import json
import sys
import types

import pytest
from agentcompass import hookimpl
from agentcompass.cli.main import cli
from agentcompass.errors import UsageError
from agentcompass.plugins import load_plugins
from click.testing import CliRunner

from tests.helpers.cli_processes import run_cli_subprocess


def fake_entry_point(name: str, module: types.ModuleType) -> importlib.metadata.EntryPoint:
    sys.modules[module.__name__] = module
    return importlib.metadata.EntryPoint(name=name, value=module.__name__, group="agentcompass")


def module_with(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


@pytest.fixture
def installed():
    return list(importlib.metadata.entry_points(group="agentcompass"))


def test_builtins_arrive_through_the_core_entry_point(installed):
    names = {ep.name: ep.value for ep in installed}
    assert names["builtin"] == "agentcompass.builtin.plugin"
    host = load_plugins()
    builtin = host.records["builtin"]
    assert builtin.error is None and builtin.distribution == "agentcompass-core"
    assert builtin.registers["harness"] == ["none", "nop", "oracle"]
    assert "local" in builtin.registers["environment"] and "mock" in builtin.registers["model"]


def test_an_import_error_is_reported_and_the_others_keep_working(installed):
    eps = [*installed, importlib.metadata.EntryPoint(name="broken", value="no_such_module_xyz", group="agentcompass")]
    host = load_plugins(eps)
    assert "ModuleNotFoundError" in host.records["broken"].error
    assert not host.records["broken"].loaded
    assert "example_interactive" in host.names("benchmark")
    with pytest.raises(UsageError, match="Plugins that failed to load: broken"):
        host.factory("benchmark", "whatever")


def test_a_failing_registration_unregisters_the_plugin(installed):
    def register_benchmarks(register):
        register("half_done", object)
        raise RuntimeError("registration bug")

    bad = module_with("tests_bad_registration", register_benchmarks=hookimpl(register_benchmarks))
    host = load_plugins([*installed, fake_entry_point("badreg", bad)])
    assert host.records["badreg"].error == "RuntimeError: registration bug"
    assert "half_done" not in host.names("benchmark")
    assert not host.pm.has_plugin("badreg")


def test_duplicate_names_are_an_error_naming_both_plugins(installed):
    def register_benchmarks(register):
        register("example_interactive", object)

    dup = module_with("tests_dup_plugin", register_benchmarks=hookimpl(register_benchmarks))
    host = load_plugins([*installed, fake_entry_point("zz_dup", dup)])
    error = host.records["zz_dup"].error
    assert "'example_interactive' is registered by both plugin 'example_interactive' and plugin 'zz_dup'" in error
    assert host.registry["benchmark"]["example_interactive"].plugin == "example_interactive"


def test_a_misspelt_hook_fails_check_pending_and_is_unregistered(installed):
    def register_benchmark(register):  # missing the final "s"
        register("never", object)

    typo = module_with("tests_typo_plugin", register_benchmark=hookimpl(register_benchmark))
    host = load_plugins([*installed, fake_entry_point("typo", typo)])
    assert "register_benchmark" in host.records["typo"].error
    assert not host.pm.has_plugin("typo")


def test_load_plugins_env_restricts_loading(monkeypatch, installed):
    monkeypatch.setenv("AGENTCOMPASS_LOAD_PLUGINS", "example_coding")
    host = load_plugins(include_skipped=True)
    assert host.names("benchmark") == ["example_coding"]
    assert host.records["builtin"].loaded  # always
    assert host.records["example_interactive"].loaded is False
    monkeypatch.setenv("AGENTCOMPASS_LOAD_PLUGINS", "")
    assert load_plugins().names("benchmark") == []


def test_plugins_list_json_is_stable(installed):
    extra = importlib.metadata.EntryPoint(name="broken", value="no_such_module_xyz", group="agentcompass")
    host = load_plugins([*installed, extra])
    result = CliRunner().invoke(cli, ["plugins", "list", "--json"], obj={"plugin_host": host})
    data = json.loads(result.stdout)
    assert [p["name"] for p in data] == sorted(p["name"] for p in data)
    for plugin in data:
        assert {"name", "version", "hooks", "registers", "error"} <= set(plugin)
    broken = next(p for p in data if p["name"] == "broken")
    assert broken["error"].startswith("import failed") and broken["hooks"] == []
    table = CliRunner().invoke(cli, ["plugins", "list"], obj={"plugin_host": host}).stdout
    assert "ERROR: import failed" in table and "example_interactive" in table


def test_plugins_list_in_a_real_process():
    proc = run_cli_subprocess("plugins", "list", "--json", testing=False)
    assert proc.returncode == 0, proc.stderr
    names = {p["name"]: p for p in json.loads(proc.stdout)}
    assert {"builtin", "example_interactive", "example_coding"} <= set(names)
    assert names["example_interactive"]["registers"] == {"benchmark": ["example_interactive"]}


def test_register_commands_adds_commands_and_a_broken_one_is_reported_not_fatal():
    import click

    @hookimpl
    def good_commands(cli):
        @cli.command("greet")
        def greet():
            click.echo("hi")

    @hookimpl
    def bad_commands(cli):
        @cli.command("half")
        def half():
            pass

        raise RuntimeError("commands bug")

    @hookimpl
    def clashing_commands(cli):
        @cli.command("run")
        def run():
            pass

    good = module_with("ac_cmd_good", register_commands=good_commands)
    bad = module_with("ac_cmd_bad", register_commands=bad_commands)
    clash = module_with("ac_cmd_clash", register_commands=clashing_commands)
    host = load_plugins([fake_entry_point("good", good), fake_entry_point("bad", bad),
                         fake_entry_point("clash", clash)], only="good,bad,clash")
    group = click.Group("agentcompass", commands=dict(cli.commands))
    host.add_commands(group)
    assert "greet" in group.commands and "half" not in group.commands
    assert group.commands["run"] is cli.commands["run"]  # the clash did not replace the core's command
    assert host.records["good"].registers == {"command": ["greet"]} and host.records["good"].error is None
    assert host.records["bad"].error == "register_commands failed: RuntimeError: commands bug"
    assert "already provided" in host.records["clash"].error
    result = CliRunner().invoke(group, ["greet"], obj={"plugin_host": host})
    assert result.exit_code == 0 and result.output == "hi\n"


def test_registration_hooks_are_called_through_pluggy_so_wrappers_run():
    seen: list[str] = []

    class Plugin:
        @hookimpl(wrapper=True)
        def register_benchmarks(self, register):
            seen.append("wrapper")
            return (yield)

        @hookimpl
        def register_harnesses(self, register):
            register("hx", lambda **o: None)

    host = load_plugins([], only="")
    record = host.add_plugin(Plugin(), "wrapped")
    assert record.error is None and seen == ["wrapper"]
    assert host.names("harness").count("hx") == 1


def test_plugins_list_names_each_harness_default_limits_per_attempt():
    proc = run_cli_subprocess("plugins", "list", "--json", testing=False)
    assert proc.returncode == 0, proc.stderr
    limits = {p["name"]: p["limits"] for p in json.loads(proc.stdout)}
    assert limits["agents"]["codex"] == "200 calls, 4,000,000 tokens per attempt"
    assert limits["harnesses"] == {"react": "1,000,000 tokens per attempt"}
    assert limits["builtin"] == {}  # none, nop and oracle call no model of their own
    table = run_cli_subprocess("plugins", "list", testing=False).stdout
    assert "limits of react: 1,000,000 tokens per attempt (change with --harness-arg" in table
    assert "claude-code, codex" in table


def test_an_observer_switched_off_at_registration_registers_no_observer_hook():
    """``agentcompass_observing()`` answering False as the plugin is added leaves its observer hooks out of the
    plugin manager (no call per event), keeps its registrations, and ``refresh_observers`` asks again."""
    calls: list[str] = []

    class Plugin:
        on = False

        def agentcompass_observing(self):
            return self.on

        @hookimpl
        def register_harnesses(self, register):
            register("hx", lambda **o: None)

        @hookimpl
        def agentcompass_task_event(self, event):
            calls.append(event)

    plugin = Plugin()
    host = load_plugins([], only="")
    record = host.add_plugin(plugin, "switchable")
    assert record.loaded and record.hooks == ["register_harnesses"] and host.names("harness") == ["hx"]
    assert not [i for i in host.pm.hook.agentcompass_task_event.get_hookimpls() if i.plugin_name == "switchable"]
    host.notify("agentcompass_task_event", event="e1")
    assert calls == []
    plugin.on = True
    assert host.refresh_observers("switchable") is True
    assert record.hooks == ["agentcompass_task_event", "register_harnesses"] and host.names("harness") == ["hx"]
    host.notify("agentcompass_task_event", event="e2")
    assert calls == ["e2"]
    plugin.on = False
    assert host.refresh_observers("switchable") is False and host.refresh_observers("no-such-plugin") is False
    host.notify("agentcompass_task_event", event="e3")
    assert calls == ["e2"]
