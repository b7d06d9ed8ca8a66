"""Typed packages (PEP 561): the core and every plugin's import package carry a ``py.typed`` marker, in the
source tree and in the wheels built from it, so a type checker reads their annotations in a user's project.

(mypy itself runs in the ``typecheck`` nox session, which CI's ``.ci/run`` calls.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def workspace_members() -> list[Path]:
    """Every workspace member's directory (the core and the plugins), from the root ``pyproject.toml``."""
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = root["tool"]["uv"]["workspace"]["members"]
    return sorted(d for g in globs for d in ROOT.glob(g) if (d / "pyproject.toml").is_file())


def import_packages(member: Path) -> list[Path]:
    """The import packages ``member``'s wheel ships (hatch's ``packages``, else every package under ``src/``)."""
    config = tomllib.loads((member / "pyproject.toml").read_text())
    listed = config.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {})
    if "packages" in listed:
        return [member / p for p in listed["packages"]]
    return sorted(p.parent for p in (member / "src").glob("*/__init__.py"))


def test_the_workspace_holds_the_core_and_the_plugins():
    names = {m.name for m in workspace_members()}
    assert "agentcompass_core" in names
    assert {p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file()} <= names


@pytest.mark.parametrize("member", workspace_members(), ids=lambda m: m.name)
def test_every_import_package_ships_py_typed(member):
    packages = import_packages(member)
    assert packages, f"{member.name}: no import package found"
    missing = [str(p.relative_to(ROOT)) for p in packages if not (p / "py.typed").is_file()]
    assert not missing, f"no py.typed (PEP 561) in {', '.join(missing)}: add an empty one"


@pytest.mark.slow
def test_built_wheels_carry_py_typed(tmp_path):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    subprocess.run([uv, "build", "--all-packages", "--wheel", "-q", "-o", str(tmp_path)], cwd=ROOT, env=env,
                   check=True, timeout=600)
    for member in workspace_members():
        dist = tomllib.loads((member / "pyproject.toml").read_text())["project"]["name"].replace("-", "_")
        (wheel,) = tmp_path.glob(f"{dist}-*.whl")
        names = set(zipfile.ZipFile(wheel).namelist())
        for package in import_packages(member):
            assert f"{package.name}/py.typed" in names, f"{wheel.name} lacks {package.name}/py.typed"
