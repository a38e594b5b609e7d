"""The README is a 3-minute read that links to docs/ for the rest; no link leads nowhere; the rules
the docs state (what a resume must keep, the defaults) agree with the code."""

import dataclasses
import json
import re

import pytest

from a3c_torch.config import IDENTITY_FIELDS, IDENTITY_FLAGS, ADAM_LR_PER_SQRT_ENV, RMSPROP_LR_PER_ENV, STALENESS_BUDGET, Config, build_parser, default_adam_beta1, default_envs_per_process
from helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)|<img src=\"([^\"]+)\"")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(page) -> set:
    return {anchor(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


def test_every_relative_link_and_image_exists():
    for page in PAGES:
        for match in LINK.finditer(page.read_text()):
            target = match.group(1) or match.group(2)
            if re.match(r"[a-z]+://", target):
                continue
            path, _, fragment = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            assert resolved.exists(), f"{page.name}: {target}"
            if fragment:
                assert fragment in anchors_of(resolved), f"{page.name}: {target}: no such heading"


def test_the_readme_is_short_and_links_every_page_of_docs():
    readme = (REPO / "README.md").read_text()
    assert len(readme) < 6000, len(readme)
    for page in PAGES[1:]:
        assert f"(docs/{page.name}" in readme, page.name
    for row in readme.split("## Results", 1)[1].split("\n## ", 1)[0].splitlines():
        if row.startswith("| ") and not row.startswith("| run |"):
            assert len(row) < 250 and "](results/" in row or "](tests/" in row, row  # one short line, with its evidence


def test_the_pictures_are_small():
    for image in ("docs/images/breakout-agent.gif", "docs/images/pong-84-agent.gif", "results/breakout-a3c-k4-lr4e-4/learning_curve.png", "results/breakout-a3c-centred-linear-k4/learning_curve.png", "results/breakout-a3c-k4-lr4e-4/breakout-agent.gif"):
        assert (REPO / image).stat().st_size < 1_000_000, image


# --- stated rules that must follow the code --------------------------------------------------------
IDENTITY_LIST = ", ".join(f"`--{name.replace('_', '-')}`" for name in IDENTITY_FIELDS)


def flat(page) -> str:
    return " ".join(page.read_text().split())  # line breaks inside a sentence do not matter


def test_the_settings_a_resume_must_keep_are_listed_as_the_code_has_them():
    """config.IDENTITY_FIELDS: --help is generated from them, and every page that states the rule
    (a resume, a distributed node) lists exactly them, in their order."""
    resume_help = next(a.help for a in build_parser()._actions if a.dest == "resume")
    assert IDENTITY_FLAGS in resume_help and all(f"--{name.replace('_', '-')}" in resume_help for name in IDENTITY_FIELDS)
    for page, times in (("training.md", 1), ("reliability.md", 2), ("distributed.md", 1)):
        assert flat(REPO / "docs" / page).count(IDENTITY_LIST) == times, f"docs/{page}: the list must read {IDENTITY_LIST}"


def flag_rows(page) -> list[tuple[list[str], str]]:
    """(flags, default cell) of each row of a page's table of train.py flags."""
    rows = []
    for line in page.read_text().splitlines():
        if line.startswith("| `--"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows.append(([f for f in re.findall(r"`--([a-z0-9-]+)`", cells[0]) if not f.startswith("no-")], cells[1]))
    return rows


def check_envs_per_process(text: str) -> None:
    """E.g. "4 (1-2 workers), 3 (3), 2 (4), 1 (5+)": every range named, and what comes after."""
    ranges = re.findall(r"(\d+) \((\d+)(?:-(\d+))?(?: workers)?\)", text)
    assert len(ranges) == 3, text
    for envs, first, last in ranges:
        assert {default_envs_per_process(n) for n in range(int(first), int(last or first) + 1)} == {int(envs)}, text
    beyond = int(ranges[-1][2] or ranges[-1][1]) + 1
    assert re.search(rf"1 \({beyond}\+\)", text) and {default_envs_per_process(n) for n in range(beyond, 65)} == {1}, text


def check_lr(text: str) -> None:
    """The default rate's rule, with whatever figures the page quotes."""
    per_env = re.search(r"([\d.]+e-\d+) x sqrt\((?:K|envs per process)\)", text)
    assert per_env and float(per_env.group(1)) == ADAM_LR_PER_SQRT_ENV, text
    for lr, workers in re.findall(r"([\d.]+e-\d+) with (\d+) workers", text):
        assert Config(num_processes=int(workers)).learning_rate == pytest.approx(float(lr), rel=0.01), text
    for cap in re.findall(r"at most ([\d.]+e-\d+) / sqrt", text):
        assert float(cap) == STALENESS_BUDGET, text
    for lr in re.findall(r"([\d.]+e-\d+) x K \(rmsprop\)", text):
        assert float(lr) == RMSPROP_LR_PER_ENV, text


def check_adam_beta1(text: str) -> None:
    """E.g. "0.9 (1-2 workers), 0 (3+)": the two values and where the second starts."""
    found = re.fullmatch(r"([\d.]+) \(1-(\d+) workers\), ([\d.]+) \((\d+)\+\)", text)
    assert found, text
    below, last, above, first = float(found[1]), int(found[2]), float(found[3]), int(found[4])
    assert first == last + 1 and {default_adam_beta1(n) for n in range(1, last + 1)} == {below}, text
    assert {default_adam_beta1(n) for n in range(first, 65)} == {above}, text


SPECIAL = {
    "num_processes": lambda text: text == "CPU cores",  # os.cpu_count()
    "envs_per_process": check_envs_per_process,
    "lr": check_lr,
    "adam_beta1": check_adam_beta1,
}


@pytest.mark.parametrize("page", ["README.md", "docs/training.md"])
def test_the_flag_tables_give_the_real_defaults(page):
    defaults = {f.name: f.default for f in dataclasses.fields(Config)}
    rows = flag_rows(REPO / page)
    assert len(rows) >= 10
    for flags, cell in rows:
        values = [cell] if len(flags) == 1 else [value.strip() for value in cell.split(", ")]
        assert len(values) == len(flags), f"{page}: {flags} | {cell}"
        for flag, value in zip(flags, values):
            name = flag.replace("-", "_")
            assert name in defaults, f"{page}: --{flag} is not a train.py flag"
            default = defaults[name]
            if name in SPECIAL:
                assert SPECIAL[name](value) is not False, f"{page}: --{flag} | {value}"
            elif value == "":
                assert default is None, f"{page}: --{flag} has a default, {default!r}"
            elif value in ("on", "off"):
                assert default == (value == "on") if isinstance(default, bool) else (value == "off" and default is None), f"{page}: --{flag} | {value}"
            elif value.startswith("`"):
                assert value == f"`{default}`", f"{page}: --{flag} | {value}, the code says {default!r}"
            else:
                assert float(value.removesuffix(" s").replace(",", "")) == default, f"{page}: --{flag} | {value}, the code says {default!r}"


def test_the_distributed_pages_figures_follow_the_default_model_and_workers():
    """docs/distributed.md's bandwidth and update-rate figures: the default model's size, and the
    envs per worker and steps per update that the defaults give for the worker counts it names."""
    from a3c_torch.model import ActorCritic

    text = flat(REPO / "docs" / "distributed.md")
    size = re.search(r"the default 84x84 model \(`--model ([\w-]+)`\) has ([\d.]+)M parameters = [\d.]+ MB in fp32 \((\d+)k = [\d.]+ MB at `--screen-size 42`; the older `universe` trunk ([\d.]+)M\)", text)
    assert size, "the bandwidth paragraph's model sizes"
    assert size[1] == Config().model

    def parameters(model: str, screen: int) -> int:
        return sum(p.numel() for p in ActorCritic((screen, screen), 4, Config().hidden_size, model).parameters())  # Breakout's 4 actions

    assert float(size[2]) == round(parameters(size[1], 84) / 1e6, 2)
    assert int(size[3]) == round(parameters(size[1], 42) / 1e3)
    assert float(size[4]) == round(parameters("universe", 84) / 1e6, 2)
    few = re.search(r"defaults with 1 or 2 workers makes [^(]*\([^)]*, (\d+) envs x (\d+) steps = (\d+) per update\)", text)
    assert few and {Config(num_processes=n).envs_per_process for n in (1, 2)} == {int(few[1])}
    assert int(few[2]) == Config().num_steps and int(few[3]) == int(few[1]) * int(few[2])
    node = re.search(r"node of (\d+) workers at the defaults \((\d+) envs? each, so (\d+) agent steps per update\)", text)
    assert node, "the bandwidth paragraph's node"
    cfg = Config(num_processes=int(node[1]))
    assert (int(node[2]), int(node[3])) == (cfg.envs_per_process, cfg.envs_per_process * cfg.num_steps), node[0]


def test_the_layout_names_every_module():
    """docs/training.md's Layout: every module of a3c_torch, storage/ and evaluation/ (distributed/
    is named as one package)."""
    layout = (REPO / "docs" / "training.md").read_text().split("## Layout", 1)[1]
    for path in sorted((REPO / "a3c_torch").glob("*.py")):
        assert path.name == "__init__.py" or f"a3c_torch/{path.name} " in layout, f"a3c_torch/{path.name} is missing from the Layout"
    for package in ("storage", "evaluation"):
        listed = layout.split(f"a3c_torch/{package}/", 1)[1].split("\na3c_torch/", 1)[0]
        for path in sorted((REPO / "a3c_torch" / package).glob("*.py")):
            assert path.name == "__init__.py" or f"\n  {path.name} " in listed, f"a3c_torch/{package}/{path.name} is missing from the Layout"
    assert "a3c_torch/distributed/ " in layout


def test_the_distributed_flag_table_gives_every_flag_and_its_real_default():
    from a3c_torch.distributed.world import DistributedSettings

    defaults = {f.name: f.default for f in dataclasses.fields(DistributedSettings)}
    rows = {flags[0].replace("-", "_"): cell for flags, cell in flag_rows(REPO / "docs" / "distributed.md")}
    assert set(rows) == set(defaults), "every flag of the distributed node, and no other"
    for name, cell in rows.items():
        if defaults[name] is None:  # unset: the cell says what that means, in words
            assert not re.fullmatch(r"[\d.]+", cell), f"--{name}: {cell}"
        else:
            assert float(cell) == defaults[name], f"docs/distributed.md: --{name.replace('_', '-')} | {cell}, the code says {defaults[name]!r}"


def test_the_readme_gifs_game_is_quoted_as_its_evaluation_recorded_it():
    """docs/evaluation.md names the GIF's game twice (its length, and how long it lasts at 15 steps
    a second): both from game 1 of the evaluation it was recorded from."""
    text = flat(REPO / "docs" / "evaluation.md")
    source = re.search(r"the same as game 1 of `(results/[^`]+)\.txt`", text)
    evaluation = json.loads((REPO / f"{source[1]}.json").read_text())
    score, length = int(evaluation["returns"][0]), evaluation["lengths"][0]
    assert f"ended with a return of {score} in {length:,} agent steps" in text
    minutes, seconds = divmod(round(length / 15), 60)
    assert f"the game in the README's GIF, {length:,} steps, lasts {minutes} min {seconds} s" in text


def test_no_page_points_to_an_issue_tracker_the_repository_does_not_have():
    for page in PAGES:
        found = re.search(r"\b[Ii]ssues? #?\d+", page.read_text())
        assert not found, f"{page.name}: {found[0]}: say what it is instead"
