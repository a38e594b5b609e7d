"""`pip install .` installs what `make` installs: pyproject.toml declares requirements.txt's pins."""

import re

import pytest

from helpers import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

TEST_ONLY = {"pytest", "pytest-timeout"}


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name = re.split(r"[=<>!~\[ ]", line, maxsplit=1)[0].lower()
            pins[name] = line
    return pins


def test_pyproject_declares_the_same_pins_as_requirements_txt():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[=<>!~\[ ]", d, maxsplit=1)[0].lower(): d for d in project["dependencies"]}
    declared_tests = {re.split(r"[=<>!~\[ ]", d, maxsplit=1)[0].lower(): d for d in project["optional-dependencies"]["test"]}
    pins = requirement_pins()
    assert declared == {name: pin for name, pin in pins.items() if name not in TEST_ONLY}
    assert declared_tests == {name: pin for name, pin in pins.items() if name in TEST_ONLY}
    assert declared["torch"] == "torch==2.13.0"  # never unpinned: that pulls a multi-GB CUDA build


def test_the_package_is_found_and_nothing_else():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["a3c_torch*"]
    assert (REPO / "a3c_torch" / "__init__.py").exists() and (REPO / "a3c_torch" / "distributed" / "__init__.py").exists()
