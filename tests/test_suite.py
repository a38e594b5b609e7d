"""How the suite itself runs: the README's test command is what CI runs, the Makefile's pytest line
is the one docs/training.md quotes, and the tests that must not overlap share an xdist group."""

import re

from helpers import REPO


def makefile_variable(name: str) -> str:
    return re.search(rf"^{name} \?= (.*)$", (REPO / "Makefile").read_text(), re.M).group(1)


def makefile_test_recipe() -> str:
    """`make test`'s command, as it runs by default: $(VENV)/bin/python -> python, $(TEST_JOBS) filled in."""
    recipe = re.search(r"^test: .*\n\t(.*)$", (REPO / "Makefile").read_text(), re.M).group(1)
    return recipe.replace("$(VENV)/bin/python", "python").replace("$(TEST_JOBS)", makefile_variable("TEST_JOBS"))


def test_ci_runs_the_readmes_test_command_and_the_docs_say_what_it_runs():
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == ["make test"], ci
    readme = (REPO / "README.md").read_text()
    assert re.search(r"^make test +# ", readme, re.M), "the README's test command is `make test`, as CI runs it"
    assert makefile_test_recipe() == "python -m pytest -q -n 2 --dist loadgroup"
    assert f"then: {makefile_test_recipe()}\n" in (REPO / "docs" / "training.md").read_text()


def test_every_test_file_that_starts_a_distributed_world_runs_in_the_distributed_group():
    """A world listens on its rendezvous port and on that port + 1 (RPC), which nothing reserves:
    two worlds started at once by two test processes could take each other's ports."""
    launchers = ("torch.distributed.run", "a3c_torch.distributed.launch")  # torchrun, ours
    starting = [path for path in sorted((REPO / "tests").glob("test_*.py")) if path.name != "test_suite.py" and any(name in path.read_text() for name in launchers)]
    assert {path.name for path in starting} >= {"test_distributed_e2e.py", "test_distributed_failures.py"}
    for path in starting:
        assert re.search(r'^pytestmark = .*xdist_group\("distributed"\)', path.read_text(), re.M), f"{path.name}: add pytest.mark.xdist_group(\"distributed\") to its pytestmark"
