"""--help must read true: a switch says which way it flips the setting, an optional flag says what
leaving it out means, and every shown default is the real one, shown once.

The checks run over every flag of the three commands (train.py, evaluate.py, the distributed
node), so a flag added later is held to the same rules without a new test.
"""

import argparse
import dataclasses
import re

import pytest

from a3c_torch.config import Config, build_parser, parse_args
from helpers import run_command


def train_parser():
    return build_parser()


def evaluate_parser():
    from a3c_torch.evaluation.flags import build_parser as build

    return build()


def distributed_parser():
    from a3c_torch.distributed.world import add_arguments

    parser = build_parser()
    add_arguments(parser)
    return parser


PARSERS = {"train.py": train_parser, "evaluate.py": evaluate_parser, "distributed": distributed_parser}


def options(parser):
    """(action, its help as --help prints it, with whitespace folded) for every flag but -h."""
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        yield action, " ".join(formatter._expand_help(action).split())


def flag_of(action):
    return max(action.option_strings, key=len)


@pytest.mark.parametrize("command", PARSERS)
def test_no_empty_or_repeated_defaults(command):
    for action, text in options(PARSERS[command]()):
        assert not re.search(r"\(default: (None|True|False)\)", text), f"{flag_of(action)}: {text}"
        assert text.count("default") <= 1, f"{flag_of(action)} names its default more than once: {text}"


@pytest.mark.parametrize("command", PARSERS)
def test_shown_defaults_are_the_real_ones(command):
    for action, text in options(PARSERS[command]()):
        if action.nargs == 0 or action.default is None:
            continue
        assert f"{action.default}" in text, f"{flag_of(action)}: the default {action.default!r} is not in its help: {text}"


@pytest.mark.parametrize("command", PARSERS)
def test_switches_say_which_way_they_flip(command):
    parser = PARSERS[command]()
    for action, text in options(parser):
        if action.nargs != 0:
            continue
        default = getattr(parser.parse_args([]), action.dest)
        if isinstance(action, argparse.BooleanOptionalAction):
            # A pair, --x / --no-x (train.py's settings): each flag sets its own way, and the help
            # names the other flag and says which way the setting is by default.
            on, off = action.option_strings
            assert getattr(parser.parse_args([on]), action.dest) is True and getattr(parser.parse_args([off]), action.dest) is False, on
            assert text.endswith("(on by default)" if default else "(off by default)"), f"{on}: {text}"
            assert (off if default else on) in text or not default, f"{on}: the help does not say how to turn it off: {text}"
            continue
        flag = flag_of(action)
        flipped = getattr(parser.parse_args([flag]), action.dest)
        assert flipped is (not default), f"{flag} does not flip {action.dest}"
        if default:  # on unless the flag is given: it must be named and described as turning it off
            assert flag.startswith("--no-"), flag
            assert text.startswith(("turn off", "do not", "don't", "skip", "disable")), f"{flag} reads as if it turned something on: {text}"
        else:
            assert not flag.startswith("--no-"), flag
        if command != "evaluate.py":  # train.py's switches come from Config and say their default
            assert text.endswith("(on by default)" if default else "(off by default)"), f"{flag}: {text}"


def test_every_optional_setting_says_what_unset_means():
    helps = {action.dest: text for action, text in options(build_parser())}
    for f in dataclasses.fields(Config):
        if f.default is None:
            assert "(default:" in helps[f.name], f"--{f.name.replace('_', '-')}: {helps[f.name]}"


def test_every_config_bool_is_a_pair_that_parses_as_its_help_says():
    for f in dataclasses.fields(Config):
        if f.type not in ("bool", bool):
            continue
        flag = "--" + f.name.replace("_", "-")
        for given, value in ((flag, True), ("--no-" + flag[2:], False)):
            cfg, explicit = parse_args([given])
            assert getattr(cfg, f.name) is value and f.name in explicit, given


def test_train_help_as_a_user_sees_it():
    result = run_command("train.py", "--help", timeout=60)
    assert result.returncode == 0 and not result.stderr
    text = " ".join(result.stdout.split())
    assert "--evaluator, --no-evaluator run the evaluator process" in text and "--no-evaluator turns it off (on by default)" in text
    assert "--lr LR learning rate (default: 2e-4 x sqrt(ENVS_PER_PROCESS) with --optimizer adam, at most 5.3e-4 / sqrt(NUM_PROCESSES - 1);" in text
    assert "--envs-per-process ENVS_PER_PROCESS envs each worker plays side by side" in text and "(default: 4 for 1 or 2 workers, 3 for 3, 2 for 4, 1 for 5 or more:" in text
    assert "None" not in text
