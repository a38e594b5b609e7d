"""Reference scores the suite is read against, each table with where it comes from.

Kept as data, not typed into the report: the report states every source next to its numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

# The default suite: the two games the defaults were tuned on with 3 seeds, four more
# with 1 seed each. Seeds are train.py --seed values.
DEFAULT_SUITE = (
    ("Breakout", (1, 2, 3)),
    ("Pong", (1, 2, 3)),
    ("SpaceInvaders", (1,)),
    ("Seaquest", (1,)),
    ("BeamRider", (1,)),
    ("Qbert", (1,)),
)


@dataclass(frozen=True)
class Anchor:
    mean: float
    std: float


# PPO at 10M agent steps (40M frames): mean +- std across 3 seeds of each seed's mean return over
# its last 100 training episodes, as the project's benchmark plan quotes them (not re-derived here).
PPO_SOURCE = ("CleanRL's JAX + envpool PPO, openrlbenchmark's `machado_10M` runs (sticky actions 0.25), "
              "and the same PPO without sticky actions; 10M agent steps, 3 seeds, last 100 training episodes; as the project's benchmark plan quotes them")
PPO_CAVEAT = "PPO played the full 18-action set and had no life-loss signal: a harder protocol than ours (the game's minimal action set, life loss as a terminal for the learner)"
PPO_STICKY = {
    "Breakout": Anchor(198, 59),
    "Pong": Anchor(15.2, 1.6),
    "SpaceInvaders": Anchor(887, 119),
    "Seaquest": Anchor(2056, 210),
    "BeamRider": Anchor(1620, 83),
    "Qbert": Anchor(15130, 392),
}
PPO_NO_STICKY = {
    "Breakout": Anchor(466, 14),
    "Pong": Anchor(20.6, 0.2),
    "SpaceInvaders": Anchor(1164, 177),
    "Seaquest": Anchor(1203, 364),
    "BeamRider": Anchor(3134, 293),
    "Qbert": Anchor(17319, 386),
}

# Human-normalized score = (score - random) / (human - random): 0 is a uniformly random policy, 1 a
# professional human game tester. The usual Atari-57 reference pair, as tabulated in DeepMind's
# DQN Zoo (dqn_zoo/atari_data.py). Both were measured without sticky actions, with up to 30 no-op
# starts and games capped at 108,000 frames: a yardstick, not the same protocol as ours.
HUMAN_SOURCE = ("random and human scores of the Atari-57 table in DeepMind's DQN Zoo (`dqn_zoo/atari_data.py`): "
                "random = uniformly random actions, human = a professional game tester; no-op starts, no sticky actions")
RANDOM_AND_HUMAN = {
    "Breakout": (1.7, 30.5),
    "Pong": (-20.7, 14.6),
    "SpaceInvaders": (148.0, 1668.7),
    "Seaquest": (68.4, 42054.7),
    "BeamRider": (363.9, 16926.5),
    "Qbert": (163.9, 13455.0),
}


def human_normalized(game: str, score: float) -> float | None:
    """None for a game without reference scores."""
    if game not in RANDOM_AND_HUMAN:
        return None
    random, human = RANDOM_AND_HUMAN[game]
    return (score - random) / (human - random)


def ppo_normalized(game: str, score: float) -> float | None:
    """Like human_normalized with the PPO sticky anchor's mean in the human's place: 0 random, 1
    level with PPO. Measured from the random score, not as score / PPO: Pong's scores run from -21
    to 21, where a plain ratio means nothing. None for a game without both references."""
    if game not in RANDOM_AND_HUMAN or game not in PPO_STICKY:
        return None
    random = RANDOM_AND_HUMAN[game][0]
    return (score - random) / (PPO_STICKY[game].mean - random)
