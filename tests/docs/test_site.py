"""The documentation site (mkdocs.yml, docs/): every CLI option appears in the generated command-line reference,
every placeholder of every page resolves (README sections, plugin READMEs), every link into the repository has a
page, and the whole site builds with warnings as errors (``mkdocs build --strict``, the ``docs`` nox session)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _hooks():
    spec = importlib.util.spec_from_file_location("agentcompass_docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _hooks()

#: In a child process (the reference adds the installed plugins' commands to the command line, as ``main()``
#: does): the generated reference, and every command's options as click itself describes them.
REFERENCE = """
import json, runpy, sys
import click
hooks = runpy.run_path(sys.argv[1])
cli = hooks["full_cli"]()
reference = hooks["cli_reference"](cli)
ctx = click.Context(cli, info_name="agentcompass")
print(json.dumps({"reference": reference, "info": cli.to_info_dict(ctx)}, default=str))
"""


def _commands(info: dict, path: tuple[str, ...]):
    for name, command in info.get("commands", {}).items():
        yield (*path, name), command
        yield from _commands(command, (*path, name))


def test_every_cli_option_appears_in_the_reference():
    done = subprocess.run([sys.executable, "-c", REFERENCE, str(DOCS / "hooks.py")], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    reference, info = out["reference"], out["info"]
    sections = dict(re.findall(r"^## `([^`]+)`\n(.*?)(?=^## `|\Z)", reference, flags=re.M | re.S))
    commands = list(_commands(info, ("agentcompass",)))
    assert {" ".join(p) for p, _ in commands} == set(sections), "a command without its section, or the reverse"
    assert {"agentcompass run", "agentcompass new", "agentcompass view", "agentcompass export inspect"} <= set(sections)
    missing = []
    for path, command in commands:
        section = sections[" ".join(path)]
        for param in command["params"]:
            if param["param_type_name"] != "option" or param["name"] == "help":
                continue
            for flag in [*param["opts"], *param["secondary_opts"]]:
                if f"`{flag}`" not in section:
                    missing.append(f"{' '.join(path)} {flag}")
            if param.get("help") and " ".join(param["help"].split())[:40].replace("|", "\\|") not in section:
                missing.append(f"{' '.join(path)} {param['opts'][0]}: its help")
    assert missing == []
    assert "`--benchmark-arg`, `-b`" in sections["agentcompass run"] or "`-b`, `--benchmark-arg`" in sections[
        "agentcompass run"]


def test_every_placeholder_of_every_page_resolves(monkeypatch):
    monkeypatch.setattr(hooks, "cli_reference", lambda cli=None: "CLI")
    monkeypatch.setattr(hooks, "api_reference", lambda: "API")
    pages = [p for p in DOCS.rglob("*.md") if "examples" not in p.relative_to(DOCS).parts]
    assert len(pages) >= 20
    for page in pages:
        text = page.read_text()
        filled = hooks.fill(text)  # raises DocsError naming a heading or file that does not exist
        assert "<!-- readme" not in filled and "<!-- include" not in filled, page
        for link in re.findall(r"\]\((plugins/agentcompass-[^)]+|docs/[^)]+)\)", filled):
            pytest.fail(f"{page.relative_to(ROOT)}: a link into the repository the site has no page for: {link}")


def test_every_rewritten_link_names_a_page_that_exists():
    for source, target in hooks.LINKS.items():
        page = target.split("#")[0].lstrip("/")
        assert (DOCS / page).is_file(), f"{source} -> {target}: no docs/{page}"
        if not source.startswith("#"):
            assert (ROOT / source).is_file(), source


def test_a_missing_heading_or_file_stops_the_build():
    with pytest.raises(hooks.DocsError, match=r"README\.md has no heading 'No such section'"):
        hooks.fill("<!-- readme: No such section -->")
    with pytest.raises(hooks.DocsError, match=r"include: \.\./etc/passwd is not a file of the repository"):
        hooks.fill("<!-- include: ../etc/passwd -->")


TEXT = st.text(alphabet="abc xyz", min_size=1, max_size=12).map(str.strip).filter(bool)


@given(level=st.integers(1, 4), title=TEXT, body=TEXT, sub=TEXT, after=TEXT)
def test_a_section_is_its_body_up_to_the_next_heading_of_its_level(level, title, body, sub, after):
    hashes = "#" * level
    readme = (f"{hashes} {title}\n\n{body}\n\n{hashes}# {sub}\n\nmore\n\n```\n{hashes} not a heading\n```\n\n"
              f"{hashes} {after}\n\nnext\n")
    section = hooks.readme_section(title, readme)
    assert section.startswith(body) and "next" not in section
    assert f"\n## {sub}\n" in section  # the first level under the section is the page's ##
    assert f"\n{hashes} not a heading\n" in section  # code blocks are left alone
    assert hooks.readme_section(title, readme, intro=True).strip() == body


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or shutil.which("uv") is None:
        pytest.skip("the docs dependency group is not installed (uv sync --group docs)")
    site = tmp_path / "site"
    done = subprocess.run(["uv", "run", "--group", "docs", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    from agentcompass.runtime import PUBLIC_MODULES

    api = (site / "reference" / "api" / "index.html").read_text()
    for module in PUBLIC_MODULES:
        assert f'id="{module}"' in api, f"{module} has no section in the API reference"
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert 'id="agentcompass-run"' in cli and "--benchmark-arg" in cli
    swebench = (site / "benchmarks" / "swebench" / "index.html").read_text()
    assert "dataset=SWE-bench/SWE-bench_Verified" in swebench  # the plugin's README, embedded
