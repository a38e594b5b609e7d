"""Every training setting in one dataclass, and the command line built from it.

Each field's docstring-like ``help`` metadata is what ``python train.py --help`` shows, with the
default next to it, so the flags and their documentation cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Optional

from a3c_torch.errors import UsageError, program_name

# The default learning rate for --envs-per-process K. An update sums the rollouts of K envs (K x
# --num-steps agent steps), so a worker makes 1/K of the updates per agent step. Adam moves every
# weight by about the lr per update whatever the gradient's scale, and where the gradient's noise
# dominates (most of training) its progress per agent step, and its noise, stay the same when the
# lr grows as sqrt(K), not as K: the square-root scaling rule of adaptive optimizers
# (tests/test_lr_scaling.py shows it on SharedAdam). So Adam takes 2e-4 x sqrt(K): 4e-4 at K = 4,
# what learned Breakout about 3x and Pong far faster per step than 1e-4 (results/breakout-a3c-k4-
# lr4e-4, results/pong-a3c-k4). The rule until 2026-12-06 was 1e-4 x K, which starved small K:
# 8 workers at K = 2 and 2e-4 trailed 2 workers by 10-25% per 0.5M steps of Breakout
# (results/breakout-8-workers). RMSProp with the paper's eps 0.1 steps more like SGD, whose rule
# is linear: 7e-4 x K (not measured here).
ADAM_LR_PER_SQRT_ENV = 2e-4
RMSPROP_LR_PER_ENV = 7e-4

# Hogwild staleness. With N workers about N - 1 other updates land between a worker's copy of the
# shared weights and its own update (losses/staleness), and Adam moves every weight by about the
# learning rate on each of them. Measured on Breakout, one seed each (results/hogwild-staleness):
# lr x sqrt(N - 1) of 4e-4 (2 workers at 4e-4) and 5.3e-4 (8 workers at 2e-4) learned; 6.9e-4 (4
# workers at 4e-4) and 1.06e-3 (8 at 4e-4) stayed at the uniform policy, their FC units dying.
# The default keeps lr x sqrt(N - 1) within the budget: first with fewer envs per worker (K from 4
# down to 1, the lr staying 2e-4 x sqrt(K), so the progress per agent step stays), then, past 8
# workers, with a lower lr.
STALENESS_BUDGET = 5.3e-4
# Adam's momentum (beta1) and Hogwild. Asynchrony is a momentum of its own: each update lands on
# weights that the N - 1 updates computed meanwhile have already moved, which in expectation is
# momentum SGD with mu = 1 - 1/N (Mitliagkas et al. 2016, "Asynchrony begets momentum"). Adam's
# beta1 of 0.9 comes on top. Measured on Breakout, 8 workers at the default lr (1 env each, 2e-4),
# the same seed: with beta1 0.9 the policy stayed near uniform to 0.4M steps (1.44 at 0.3-0.4M);
# with beta1 0 it learned at once and was level with 2 workers per 0.5M to 2.5M (3.00 at 0-0.5M
# against 2.61-2.97; results/breakout-8-workers-beta1). The A3C paper's shared RMSProp had no
# momentum either. 1-2 workers keep torch's 0.9, with which every 2-worker result was trained.
ADAM_BETA1 = 0.9
ADAM_BETA1_ASYNC = 0.0
ASYNC_MOMENTUM_FROM = 3  # workers


def default_adam_beta1(num_processes: int) -> float:
    """Adam's beta1 for N workers: 0.9 for 1-2, 0 from 3 on (their asynchrony is momentum enough)."""
    return ADAM_BETA1_ASYNC if num_processes >= ASYNC_MOMENTUM_FROM else ADAM_BETA1

# The most envs per worker the default takes (measured with 1 and 2 workers; more amortise the
# network no further, see docs/benchmarks.md).
DEFAULT_ENVS_PER_PROCESS = 4


def staleness_lr_cap(num_processes: int) -> float:
    """The largest lr whose N - 1 stale updates stay within STALENESS_BUDGET."""
    return STALENESS_BUDGET / math.sqrt(max(1, num_processes - 1))


def optimizer_lr(optimizer: str, envs_per_process: int) -> float:
    """The learning rate for K envs per worker before the staleness cap: equal progress per agent step for any K."""
    if optimizer == "adam":
        return ADAM_LR_PER_SQRT_ENV * math.sqrt(envs_per_process)
    return RMSPROP_LR_PER_ENV * envs_per_process


def default_envs_per_process(num_processes: int) -> int:
    """K for N workers: the largest K <= 4 whose Adam lr (2e-4 x sqrt(K)) is within the staleness cap, at least 1."""
    fits = int((staleness_lr_cap(num_processes) / ADAM_LR_PER_SQRT_ENV) ** 2 + 1e-6)
    return max(1, min(DEFAULT_ENVS_PER_PROCESS, fits))

# Upper bounds that keep a typo from asking for terabytes: an LSTM of 1,000,000 is a 16 TB weight
# matrix, a 1,000,000-pixel screen a 931 GiB frame. Atari frames are 210x160, so a larger screen
# only upsamples; an LSTM of 4096 is already 16x the paper's.
MAX_SCREEN_SIZE = 256
MAX_HIDDEN_SIZE = 4096
# Each env is an emulator of its own (tens of MB); past a few dozen the batched forward gains nothing.
MAX_ENVS_PER_PROCESS = 256

# The conv trunks of a3c_torch/model.py that --model chooses from (the one list of them).
MODELS = ("a3c", "a3c-elu", "a3c-centred", "universe")

# Settings that define the model and the optimizer's state layout: a resumed run must keep them.
IDENTITY_FIELDS = ("env_id", "screen_size", "model", "hidden_size", "full_action_space", "optimizer")
# Their flags, as --help and the docs list them (tests/test_docs.py holds the docs to this).
IDENTITY_FLAGS = ", ".join(f"--{name.replace('_', '-')}" for name in IDENTITY_FIELDS)
# What a run's config means when it was written before the setting existed (older checkpoints).
LEGACY_VALUES = {"model": "universe", "envs_per_process": 1, "lr_schedule": "constant", "adam_beta1": ADAM_BETA1}


def _setting(default, help, **kwargs):
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass
class Config:
    # --- environment ---
    env_id: str = _setting("ALE/Breakout-v5", "gymnasium env id: an Atari game (ALE/Pong-v5, ...) or a vector-observation env (CartPole-v1, ...)")
    screen_size: int = _setting(84, "Atari frames are resized to SCREEN_SIZE x SCREEN_SIZE grayscale (84 keeps Pong's ball visible; 42 trains about 1.7x as fast but learned Pong about 3x more slowly per step in our runs)")
    repeat_action_probability: float = _setting(0.25, "sticky actions: chance the emulator repeats the previous action (0.25 is the ALE v5 protocol, 0 turns them off)")
    full_action_space: bool = _setting(False, "use all 18 Atari actions instead of the game's minimal set; --no-full-action-space keeps the minimal set")
    model: str = _setting("a3c-centred", "conv trunk for Atari frames: a3c-centred (the a3c trunk on frames minus their mean; learned Pong far sooner than a3c), a3c (the A3C paper's: conv 16 8x8/4, conv 32 4x4/2, FC 256, ReLU; Mnih et al. 2016), a3c-elu (the same layers with ELU; learned Pong worse) or universe (4x conv 32 3x3/2, ELU; about 3x the network time per step)", choices=MODELS)
    # --- processes ---
    num_processes: int = _setting(os.cpu_count() or 1, "number of Hogwild worker processes, one per CPU core is the intended use (default: this machine's CPU count, %(default)s)")
    envs_per_process: Optional[int] = _setting(None, "envs each worker plays side by side, one batched forward for all of them and one update per rollout of K x NUM_STEPS steps (1 is the A3C paper's worker; more envs amortise the network's per-call cost) (default: 4 for 1 or 2 workers, 3 for 3, 2 for 4, 1 for 5 or more: with N workers about N - 1 stale updates land inside each rollout, and fewer envs keep them small at the same progress per step; see losses/staleness and docs/training.md)")
    max_steps: int = _setting(20_000_000, "stop after this many agent steps, summed over all workers (Atari frames = steps x 4); workers finish the rollout they are in, so a run ends slightly past it (by less than one rollout per worker)")
    start_method: str = _setting("spawn", "multiprocessing start method (spawn is the safe choice with CUDA and OpenMP)", choices=("spawn", "forkserver", "fork"))
    # --- algorithm ---
    num_steps: int = _setting(20, "rollout length: steps each worker plays between two updates")
    lr: Optional[float] = _setting(None, "learning rate (default: 2e-4 x sqrt(ENVS_PER_PROCESS) with --optimizer adam, at most 5.3e-4 / sqrt(NUM_PROCESSES - 1); 7e-4 x ENVS_PER_PROCESS with rmsprop. So 4e-4 with 1 or 2 workers, 2e-4 with 5 to 8 (1 env each), 1.4e-4 with 16: Adam's progress per agent step stays the same when its lr grows as the square root of the rollouts an update sums, and each of the N - 1 updates that land inside a rollout moves the weights by about the lr)")
    adam_beta1: Optional[float] = _setting(None, "Adam's beta1, the momentum of its updates (default: 0.9 with 1 or 2 workers, 0 with 3 or more: with N workers each update lands on weights N - 1 other updates already moved, which acts as momentum of its own; 8 workers learned Breakout far sooner with 0). Not used by rmsprop")
    lr_schedule: str = _setting("linear", "learning-rate schedule: linear from --lr at step 0 down to 0 at --max-steps (the A3C paper's annealing; it follows the global step, so a run resumed with a larger --max-steps goes on along the new line), or constant", choices=("linear", "constant"))
    optimizer: str = _setting("adam", "shared optimizer: adam (SharedAdam) or rmsprop (the paper's shared RMSProp, alpha 0.99, eps 0.1)", choices=("adam", "rmsprop"))
    gamma: float = _setting(0.99, "discount factor")
    gae_lambda: float = _setting(1.0, "GAE lambda (1.0 gives the paper's n-step returns)")
    entropy_coef: float = _setting(0.01, "weight of the entropy bonus")
    value_loss_coef: float = _setting(0.5, "weight of the value loss; the value loss itself is 0.5 * (R - V)^2, so the effective factor on (R - V)^2 is 0.5 * VALUE_LOSS_COEF")
    max_grad_norm: float = _setting(40.0, "clip each worker's gradient to this global L2 norm")
    hidden_size: int = _setting(256, "LSTM cell size")
    seed: int = _setting(1, "base seed; worker i of a new run uses SEED + i (a resumed worker without a saved state derives its seed from SEED, i and the step)")
    # --- evaluation ---
    evaluator: bool = _setting(True, "run the evaluator process, which plays --eval-episodes full games with the current weights every --eval-interval seconds and keeps the best-scoring weights in checkpoints/best.pt; --no-evaluator turns it off")
    eval_device: str = _setting("auto", "evaluator device: auto (cuda when available), cpu or cuda", choices=("auto", "cpu", "cuda"))
    eval_interval: float = _setting(60.0, "seconds from the end of one evaluation to the start of the next (the first starts this long after training starts)")
    eval_episodes: int = _setting(10, "full games per evaluation (no reward clipping, no life-loss episodes)")
    target_eval_return: Optional[float] = _setting(None, "stop training as soon as an evaluation's mean return reaches this, e.g. 195 for CartPole-v1, 18 for Pong (default: off, train until --max-steps)")
    # --- output ---
    runs_dir: str = _setting("runs", "parent folder of run directories (each run gets RUNS_DIR/<env>__<exp-name>__<seed>__<date-time>)")
    exp_name: str = _setting("a3c", "experiment name, part of the run directory name")
    checkpoint_interval: float = _setting(300.0, "seconds between two writes of checkpoints/latest.pt (one more is written at the end)")
    log_interval: float = _setting(10.0, "seconds between two progress lines when stdout is not a terminal (a terminal gets a progress bar)")
    resume: Optional[str] = _setting(None, "continue a run from its run directory or a checkpoint file; flags given with it apply from there on, except those that fix the model and its optimizer, which must stay as they were: " + IDENTITY_FLAGS + " (default: start a new run)")

    def __post_init__(self):
        if self.envs_per_process is None:  # the default depends on the number of workers
            self.envs_per_process = default_envs_per_process(self.num_processes) if self.num_processes > 0 else DEFAULT_ENVS_PER_PROCESS
        if self.adam_beta1 is None:  # so does this one
            self.adam_beta1 = default_adam_beta1(self.num_processes)

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        lr = optimizer_lr(self.optimizer, self.envs_per_process)
        if self.optimizer != "adam" or self.num_processes <= 1:
            return lr
        # Past 8 workers one env each is not enough: the lr itself keeps the staleness budget.
        return min(lr, staleness_lr_cap(self.num_processes))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "Config":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**LEGACY_VALUES, **{k: v for k, v in values.items() if k in known}})


def with_resolved_lr(cfg: Config) -> Config:
    """A copy of `cfg` with --lr resolved (its default depends on the optimizer, the envs per worker
    and the workers): the rate a run trains with and records in its config.json and checkpoints."""
    return dataclasses.replace(cfg, lr=cfg.learning_rate)


def validate(cfg: Config) -> None:
    """Reject values that cannot work, with one line that names the flag."""
    positive_ints = ("num_processes", "envs_per_process", "max_steps", "num_steps", "screen_size", "hidden_size", "eval_episodes")
    for name in positive_ints:
        if getattr(cfg, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(cfg, name)}")
    for name, bound in (("screen_size", MAX_SCREEN_SIZE), ("hidden_size", MAX_HIDDEN_SIZE), ("envs_per_process", MAX_ENVS_PER_PROCESS)):
        if getattr(cfg, name) > bound:
            raise UsageError(f"--{name.replace('_', '-')} must be at most {bound}, got {getattr(cfg, name)}")
    positive_floats = ("checkpoint_interval", "eval_interval", "log_interval", "max_grad_norm")
    for name in positive_floats:
        if not getattr(cfg, name) > 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {getattr(cfg, name)}")
    if cfg.target_eval_return is not None and not cfg.evaluator:
        raise UsageError("--target-eval-return needs the evaluator (--evaluator, not --no-evaluator)")
    if cfg.lr is not None and not 0 < cfg.lr < math.inf:
        raise UsageError(f"--lr must be positive and finite, got {cfg.lr}")
    if not 0 <= cfg.adam_beta1 < 1:
        raise UsageError(f"--adam-beta1 must be in [0, 1), got {cfg.adam_beta1}")
    if not 0 <= cfg.seed < 2**31:  # NumPy seeds are unsigned 32-bit; workers add their rank
        raise UsageError(f"--seed must be in [0, 2**31), got {cfg.seed}")
    if not 0 <= cfg.gamma <= 1:
        raise UsageError(f"--gamma must be in [0, 1], got {cfg.gamma}")
    if not 0 <= cfg.gae_lambda <= 1:
        raise UsageError(f"--gae-lambda must be in [0, 1], got {cfg.gae_lambda}")
    if not 0 <= cfg.repeat_action_probability < 1:
        raise UsageError(f"--repeat-action-probability must be in [0, 1), got {cfg.repeat_action_probability}")
    for name in ("entropy_coef", "value_loss_coef"):
        if not 0 <= getattr(cfg, name) < math.inf:  # written so that NaN fails too
            raise UsageError(f"--{name.replace('_', '-')} must be a finite number >= 0, got {getattr(cfg, name)}")
    if cfg.model.startswith("a3c") and cfg.screen_size < 20:  # its 8x8/4 and 4x4/2 convolutions need 20 pixels
        raise UsageError(f"--screen-size must be at least 20 for --model {cfg.model}, got {cfg.screen_size}")
    if "/" in cfg.exp_name or not cfg.exp_name:
        raise UsageError(f"--exp-name must be a non-empty name without '/', got {cfg.exp_name!r}")


class _Parser(argparse.ArgumentParser):
    """argparse that exits with code 2 and one line, as every user error here does."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" only where X says something: not after a switch (its help says
    which way it flips the setting), not after an optional flag whose default is "unset" (its
    help says what unset means), and not a second time after a help that names its default."""

    def _split_lines(self, text, width):
        return textwrap.wrap(text, width, break_on_hyphens=False)  # keep --eval-interval in one piece

    def _get_help_string(self, action):
        help_text = action.help or ""
        if action.nargs == 0 or action.default is None or "(default" in help_text or "by default)" in help_text:
            return help_text
        return super()._get_help_string(action)


def switch_help(help_text: str, default: bool) -> str:
    """The help of a boolean setting's pair of flags (--x / --no-x): what the setting does, and
    which way it is by default."""
    return f"{help_text} ({'on' if default else 'off'} by default)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=program_name("train.py"),
        description="Train an LSTM actor-critic with A3C: Hogwild workers, one per CPU core, on a shared model.",
        formatter_class=HelpFormatter,
        # No abbreviations: `--max-step=N` must not silently stand for --max-steps (nor become
        # ambiguous when a flag is added); evaluate.py's parser refuses them too.
        allow_abbrev=False,
    )
    for f in dataclasses.fields(Config):
        meta = dict(f.metadata)
        help_text = meta.pop("help")
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            # Boolean settings are pairs, --evaluator / --no-evaluator: a resumed run can turn
            # either way what its saved config says. The help is set after the action is made:
            # BooleanOptionalAction would append "(default: True)" to it.
            action = parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=f.default)
            action.help = switch_help(help_text, f.default)
            continue
        base_type = {"int": int, "float": float, "str": str, "Optional[float]": float, "Optional[str]": str, "Optional[int]": int}[f.type]
        parser.add_argument(flag, dest=f.name, type=base_type, default=f.default, help=help_text, **meta)
    return parser


def parse_args(argv=None) -> tuple[Config, set[str]]:
    """Returns the config and the names of the settings the user gave explicitly."""
    cfg, explicit, _ = parse_with(build_parser(), argv)
    return cfg, explicit


def parse_with(parser: argparse.ArgumentParser, argv=None) -> tuple[Config, set[str], dict]:
    """Like parse_args, with a parser that may have flags of its own (returned in the dict)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    names = {f.name for f in dataclasses.fields(Config)}
    explicit = given_settings(parser, argv, names)  # resume checks need them
    values = vars(args)
    extra = {name: value for name, value in values.items() if name not in names}
    return Config(**{name: value for name, value in values.items() if name in names}), explicit, extra


def given_settings(parser: argparse.ArgumentParser, argv: list[str], names) -> set[str]:
    """Which of the settings `names` (argparse dests) the command line gives, in whatever spelling,
    even with their default value: argparse leaves a value that is already in the namespace alone
    unless a flag sets it."""
    unset = object()
    given = parser.parse_args(argv, namespace=argparse.Namespace(**{name: unset for name in names}))
    return {name for name in names if getattr(given, name) is not unset}


def changed_settings(before: Config, after: Config) -> list[str]:
    """'name old -> new' for each setting that differs (the --resume path aside): what a resume changed."""
    return [f"{field.name} {getattr(before, field.name)} -> {getattr(after, field.name)}" for field in dataclasses.fields(Config)
            if field.name != "resume" and getattr(before, field.name) != getattr(after, field.name)]


def _legacy_adam_beta1(data: dict) -> dict:
    """A run saved before --adam-beta1 existed stepped with the beta1 its optimizer state holds."""
    if "adam_beta1" in data["config"]:
        return {}
    try:
        return {"adam_beta1": float(data["optimizer"]["param_groups"][0]["betas"][0])}
    except (KeyError, IndexError, TypeError, ValueError):  # rmsprop, or no optimizer state
        return {}


def config_for_resume(cfg: Config, explicit: set[str], data: dict) -> Config:
    """The saved run's config, with the flags given now applied on top (identity flags must match)."""
    saved = Config.from_dict({**data["config"], **_legacy_adam_beta1(data)})
    for name in IDENTITY_FIELDS:
        if name in explicit and getattr(cfg, name) != getattr(saved, name):
            raise UsageError(f"--resume {cfg.resume}: the checkpoint was trained with --{name.replace('_', '-')} {getattr(saved, name)}, not {getattr(cfg, name)}")
    merged = Config.from_dict({**saved.to_dict(), **{name: getattr(cfg, name) for name in explicit if name not in IDENTITY_FIELDS}, "resume": cfg.resume})
    if merged.target_eval_return is not None and not merged.evaluator and "evaluator" not in explicit:
        raise UsageError(f"--resume {cfg.resume}: the run was trained with --no-evaluator, and --target-eval-return needs the evaluator: add --evaluator")
    validate(merged)
    if data["global_step"] >= merged.max_steps:
        raise UsageError(f"--resume {cfg.resume}: the run is already at step {data['global_step']:,} >= --max-steps {merged.max_steps:,}; pass a larger --max-steps to go on")
    return merged
