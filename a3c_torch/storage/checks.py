"""Checking what a loaded checkpoint holds, before anything uses it.

`load_checkpoint` calls `check_checkpoint` on every file it loads (train.py --resume and
evaluate.py alike), so a foreign or corrupt file is one line naming what is wrong, before a
model is built or a game is played, never a traceback from deep inside torch.

The config is checked against `Config` itself: each saved setting must have its field's type
(and be one of its choices), and together they must pass `validate()`, the same rules as the
command line. A field added to Config is checked with no change here; a setting that an older
version did not save takes its Config default, so older checkpoints still load. Saved settings
that this version does not know are ignored, as `Config.from_dict` ignores them.

A policy file (policy_file.py: weights, config and step, no optimizer) passes the same checks,
the optimizer's aside.

Non-finite weights are refused: a3c_torch never writes them (save_checkpoint refuses), so such a
file is corrupt or foreign, and a NaN policy would play (or train) silently on garbage.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import torch

from a3c_torch.config import Config, validate
from a3c_torch.errors import UsageError

# The "kind" of a policy file. A checkpoint has no kind: files written before policies existed load as they did.
POLICY_KIND = "policy"

_BASE_TYPES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}


def accepted_types(annotation) -> tuple[type, ...]:
    """The Python types a saved value of a Config field with this annotation may have."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    text = text.replace(" ", "")
    optional = False
    if text.startswith("Optional[") and text.endswith("]"):
        text, optional = text[len("Optional[") : -1], True
    elif text.endswith("|None") or text.startswith("None|"):
        text, optional = text.replace("|None", "").replace("None|", ""), True
    if text not in _BASE_TYPES:
        raise TypeError(f"storage.checks does not know the Config annotation {annotation!r}")
    return _BASE_TYPES[text] + ((type(None),) if optional else ())


def _type_name(value) -> str:
    return type(value).__name__


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not torch.is_tensor(value)


def config_problem(saved) -> str | None:
    """What is wrong with a saved config dict, or None if it makes a valid Config."""
    if not isinstance(saved, dict):
        return f"its config is a {_type_name(saved)}, not a dict of settings"
    if not isinstance(saved.get("env_id"), str) or not saved["env_id"]:
        return "its config has no env id" if "env_id" not in saved else f"its config's env_id is {saved['env_id']!r}, not an env id"
    for f in dataclasses.fields(Config):
        if f.name not in saved:
            continue  # written by a version without this setting: its default applies
        value, types = saved[f.name], accepted_types(f.type)
        wrong_bool = isinstance(value, bool) and bool not in types
        if wrong_bool or not isinstance(value, types):
            return f"its config's {f.name} is {value!r} ({_type_name(value)}), expected {f.type}"
        choices = f.metadata.get("choices")
        if choices and value not in choices:
            return f"its config's {f.name} is {value!r}, expected one of {', '.join(choices)}"
    try:
        validate(Config.from_dict(saved))
    except UsageError as exc:
        return f"its config is invalid: {exc}"
    return None


def _tensor_dict_problem(what: str, state) -> str | None:
    if not isinstance(state, dict) or not state:
        return f"its {what} is a {_type_name(state)}, not a dict of tensors" if not isinstance(state, dict) else f"its {what} is empty"
    for key, value in state.items():
        if not isinstance(key, str) or not torch.is_tensor(value):
            return f"its {what} holds {key!r}: {_type_name(value)}, expected named tensors"
    return None


def _non_finite(state: dict, prefix: str = "") -> list[str]:
    found = []
    for key, value in state.items():
        if isinstance(value, dict):
            found += _non_finite(value, f"{prefix}{key}.")
        elif torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            found.append(f"{prefix}{key}")
    return found


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def optimizer_problem(state) -> str | None:
    """torch's Optimizer.state_dict() layout: {"state": {index: {name: tensor or number}}, "param_groups": [{"params": [index, ...], ...}]}."""
    if not isinstance(state, dict) or not isinstance(state.get("state"), dict) or not isinstance(state.get("param_groups"), list):
        return f"its optimizer state is a {_type_name(state)}, not an optimizer state dict with 'state' and 'param_groups'" if not isinstance(state, dict) else "its optimizer state has no 'state' dict and 'param_groups' list"
    for group in state["param_groups"]:
        if not isinstance(group, dict) or not isinstance(group.get("params"), list) or not all(_is_int(i) for i in group["params"]):
            return "its optimizer's param_groups are not dicts with a list of parameter indices"
    for index, per_param in state["state"].items():
        if not _is_int(index) or not isinstance(per_param, dict):
            return f"its optimizer state for {index!r} is a {_type_name(per_param)}, expected a dict of tensors"
        for name, value in per_param.items():
            if not torch.is_tensor(value) and not _is_real(value):
                return f"its optimizer state {index}.{name} is a {_type_name(value)}, expected a tensor or a number"
    return None


def worker_states_problem(states) -> str | None:
    """None, or {rank: the dict that worker_state.capture_worker made}."""
    if states is None:
        return None
    if not isinstance(states, dict):
        return f"its worker_states is a {_type_name(states)}, expected a dict of rank -> state"
    for rank, state in states.items():
        if not _is_int(rank) or rank < 0:
            return f"its worker_states has the key {rank!r}, expected worker ranks (integers >= 0)"
        if not isinstance(state, dict) or not isinstance(state.get("rngs"), dict):
            return f"its worker_states[{rank}] is a {_type_name(state)}, not a saved worker state"
    return None


def is_policy(data: dict) -> bool:
    return data.get("kind") == POLICY_KIND


def checkpoint_problem(data: dict) -> str | None:
    """What is wrong with a loaded checkpoint dict (that has our keys and format version), or None."""
    step = data["global_step"]
    if not _is_int(step) or step < 0:
        return f"its global_step is {step!r} ({_type_name(step)}), expected an integer >= 0"
    policy = is_policy(data)
    problem = config_problem(data["config"]) or _tensor_dict_problem("model", data["model"]) or (None if policy else optimizer_problem(data["optimizer"]))
    if problem:
        return problem
    best = data.get("best_eval_return")
    if best is not None and not _is_real(best):
        return f"its best_eval_return is {best!r} ({_type_name(best)}), expected a number or None"
    wall = data.get("wall_time", 0.0)
    if not _is_real(wall) or not 0 <= wall < math.inf:
        return f"its wall_time is {wall!r} ({_type_name(wall)}), expected seconds >= 0"
    problem = worker_states_problem(data.get("worker_states"))
    if problem:
        return problem
    bad = _non_finite(data["model"])
    if bad:
        return f"its model weights hold NaN or inf ({_names(bad)}): a3c_torch never writes such a checkpoint, and it would play or train on garbage"
    bad = [] if policy else _non_finite(data["optimizer"]["state"], "optimizer.")
    if bad:
        return f"its optimizer state holds NaN or inf ({_names(bad)}): a3c_torch never writes such a checkpoint"
    return None


def check_checkpoint(data: dict, path) -> None:
    """A UsageError naming the file and what is wrong, if the checkpoint is unusable."""
    problem = checkpoint_problem(data)
    if problem:
        raise UsageError(f"{path}: not a usable a3c_torch checkpoint: {problem}")
