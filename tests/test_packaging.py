"""`pip install .` installs what `make` installs: pyproject.toml declares requirements.txt's pins,
and both commands (a3c-train, a3c-evaluate)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

TEST_ONLY = {"pytest", "pytest-timeout", "pytest-xdist"}


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


def test_pyproject_declares_both_commands():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"a3c-train": "a3c_torch.cli:train", "a3c-evaluate": "a3c_torch.cli:evaluate"}


def test_the_commands_set_one_openmp_thread_before_torch_is_imported():
    code = "import os, sys; import a3c_torch.cli; print(os.environ['OMP_NUM_THREADS'], 'torch' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["1", "False"], result.stderr


@pytest.mark.parametrize("command, argv, code", [
    ("train", ["--help"], 0), ("train", ["--num-processes", "0"], 2), ("train", ["--no-such-flag"], 2),
    ("evaluate", ["--help"], 0), ("evaluate", ["--episodes", "0"], 2), ("evaluate", ["--no-such-flag"], 2), ("evaluate", ["--plot", "/"], 2),
    ("evaluate", ["--checkpoint", "no/such/latest.pt"], 2), ("evaluate", ["--run-dir", "no/such/run"], 2),
])
def test_help_and_flag_mistakes_answer_before_torch_is_imported(command, argv, code):
    """torch, gymnasium and tensorboard take seconds to import: --help and a mistyped flag must not wait for them."""
    script = (f"import sys, a3c_torch.cli as cli\ntry:\n    code = cli.{command}({argv!r})\nexcept SystemExit as exit:\n    code = exit.code\n"
              "print('torch' in sys.modules, 'gymnasium' in sys.modules, code)")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines()[-1] == f"False False {code}", result.stdout[-500:] + result.stderr


@pytest.mark.slow
def test_pip_install_in_a_fresh_venv_gives_both_commands(tmp_path):
    """Offline and in seconds: a venv without packages of its own sees this interpreter's
    site-packages through a .pth file (the dependencies, pip and setuptools), and pip installs the
    project into it without its dependencies and without build isolation. The project is copied
    first: a build writes build/ and *.egg-info beside the sources."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "a3c_torch", source / "a3c_torch", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=300)
    python = venv / "bin" / "python"
    site_packages = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    (Path(site_packages) / "dependencies.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    install = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet", str(source)],
                             capture_output=True, text=True, timeout=300, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert install.returncode == 0, install.stderr
    for command, usage in (("a3c-train", "usage: a3c-train"), ("a3c-evaluate", "usage: a3c-evaluate")):
        result = subprocess.run([venv / "bin" / command, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 and result.stdout.startswith(usage), result.stderr
    located = subprocess.run([python, "-c", "import a3c_torch; print(a3c_torch.__file__)"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert located.startswith(str(venv)), f"the installed package, not the clone's: {located}"
    # A user error through the installed command: the trainer's one line and exit code 2.
    result = subprocess.run([venv / "bin" / "a3c-train", "--num-processes", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.strip() == "a3c-train: error: --num-processes must be a positive integer, got 0", result.stderr
    result = subprocess.run([venv / "bin" / "a3c-evaluate", "--checkpoint", tmp_path / "missing.pt"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("a3c-evaluate: error: "), result.stderr


def test_messages_name_the_command_as_the_user_ran_it(monkeypatch):
    from a3c_torch.errors import command_line, program_name

    for argv0, name, again in (("/venv/bin/a3c-train", "a3c-train", "a3c-train"), ("train.py", "train.py", "python train.py"), ("/clone/train.py", "train.py", "python train.py")):
        monkeypatch.setattr(sys, "argv", [argv0])
        assert (program_name("train.py"), command_line("train.py")) == (name, again)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/a3c-evaluate"])
    assert program_name("evaluate.py") == "a3c-evaluate"
