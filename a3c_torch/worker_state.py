"""A worker's resumable state: its random generators, its environment, and what it carries
between rollouts (each env's current observation, LSTM state and episode-start flag).

Workers send it to the trainer when they stop at a rollout boundary; the trainer stores it in the
final checkpoint and hands it back on `--resume`. With one worker this makes a resumed run
continue bit for bit where it stopped (tests/test_reliability.py proves it). With more workers
Hogwild updates race, so a resumed run is a valid continuation but not a replay.

Everything is stored as tensors and plain values (NumPy arrays as bytes + dtype + shape, the ALE
emulator state as its serialized bytes), so checkpoints still load with `weights_only=True`.
Environments that cannot be captured (anything that is neither ALE nor a classic-control env
whose state is a NumPy array) resume with a fresh episode instead.
"""

from __future__ import annotations

import io
import random

import numpy as np
import torch

from a3c_torch.sticky_action import held_action, set_held_action

# Per-wrapper attributes that change while playing; every one we stack is covered:
# TimeLimit, RecordEpisodeStatistics, AtariPreprocessing (its frame max-pool buffer), LifeLossTerminal.
WRAPPER_FIELDS = ("_elapsed_steps", "episode_returns", "episode_lengths", "lives", "game_over", "obs_buffer", "_has_reset")


# --- plain values -------------------------------------------------------------------------------
def encode(value):
    """NumPy arrays and scalars inside dicts/lists/tuples -> values weights_only can load."""
    if isinstance(value, np.ndarray):
        return {"ndarray": value.tobytes(), "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(encode(item) for item in value)
    return value


def decode(value):
    if isinstance(value, dict) and "ndarray" in value:
        return np.frombuffer(value["ndarray"], dtype=np.dtype(value["dtype"])).reshape(value["shape"]).copy()
    if isinstance(value, dict):
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(decode(item) for item in value)
    return value


def pack(state: dict) -> bytes:
    """Bytes for the stats queue: tensors sent as tensors would need the sender alive to unpickle."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def unpack(blob: bytes) -> dict:
    return torch.load(io.BytesIO(blob), weights_only=True)


# --- random generators ----------------------------------------------------------------------------
def capture_rngs() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": encode(np.random.get_state(legacy=False)), "python": encode(random.getstate())}


def restore_rngs(saved: dict) -> None:
    torch.set_rng_state(saved["torch"])
    np.random.set_state(decode(saved["numpy"]))
    version, internal, gauss_next = saved["python"]
    random.setstate((version, tuple(internal), gauss_next))


# --- the environment ------------------------------------------------------------------------------
def _wrappers(env) -> list:
    layers = []
    while hasattr(env, "env"):
        layers.append(env)
        env = env.env
    return layers


def _layers(env) -> list[tuple[str, dict]]:
    """(name, changing fields) of each wrapper, outermost first. The lean Atari stack (atari.py)
    reports the gymnasium wrappers it stands for: a state saved on either stack restores on both."""
    if hasattr(env, "reference_layers"):
        return env.reference_layers()
    return [(type(layer).__name__, {k: v for k, v in vars(layer).items() if k in WRAPPER_FIELDS}) for layer in _wrappers(env)]


def capture_env(env) -> dict | None:
    """The env's full state, or None when its kind cannot be captured."""
    core = env.unwrapped
    if hasattr(core, "ale"):
        # The sticky-action RNG is in the state; the action a sticky frame repeats is not.
        emulator = {"ale": core.ale.cloneState(include_rng=True).serialize(), "held_action": held_action(core.ale)}
    elif isinstance(getattr(core, "state", None), np.ndarray):
        emulator = {"state": encode(core.state), "steps_beyond_terminated": getattr(core, "steps_beyond_terminated", None)}
    else:
        return None
    layers = _layers(env)
    return {
        "layers": [name for name, _ in layers],
        "wrappers": [encode(fields) for _, fields in layers],
        "emulator": emulator,
        "np_random": encode(core.np_random.bit_generator.state),
    }


def restore_env(env, saved: dict) -> bool:
    """Put a freshly made env into the saved state; False (env untouched) if it is another stack."""
    if [name for name, _ in _layers(env)] != saved["layers"]:
        return False
    core = env.unwrapped
    if "ale" in saved["emulator"]:
        import ale_py  # only Atari states need it; envs.py has imported it already

        state = ale_py.ALEState(saved["emulator"]["ale"])
        core.ale.restoreState(state)
        if saved["emulator"].get("held_action") is not None:  # states saved before it was kept lack it
            set_held_action(core.ale, saved["emulator"]["held_action"], state)
    else:
        core.state = decode(saved["emulator"]["state"])
        core.steps_beyond_terminated = saved["emulator"]["steps_beyond_terminated"]
    fields = [decode(layer) for layer in saved["wrappers"]]
    if hasattr(env, "restore_reference_layers"):
        env.restore_reference_layers(fields)
    else:
        for layer, values in zip(_wrappers(env), fields):
            for key, value in values.items():
                setattr(layer, key, value)
    core.np_random.bit_generator.state = decode(saved["np_random"])
    return True


# --- the whole worker -------------------------------------------------------------------------------
def capture_worker(collector) -> dict:
    """Call at a rollout boundary, after the last update: every env of the collector, in order."""
    h, c = collector.state
    return {
        "rngs": capture_rngs(),
        "envs": [capture_env(env) for env in collector.envs],
        "obs": encode(np.asarray(collector.obs)),
        "lstm": (h.clone(), c.clone()),
        "episode_starts": encode(np.asarray(collector.episode_starts)),
    }


def _as_multi_env(saved: dict) -> dict:
    """A state written before workers had several envs (one env, unbatched) in today's layout."""
    if "envs" in saved:
        return saved
    return {
        "rngs": saved["rngs"],
        "envs": [saved.get("env")],
        "obs": encode(decode(saved["obs"])[None]),
        "lstm": saved["lstm"],
        "episode_starts": encode(np.array([bool(saved["episode_start"])])),
    }


def restore_worker(saved: dict, collector) -> bool:
    """Restore everything captured; True if the envs were restored too (an exact continuation).

    Without the envs (a kind that cannot be captured, or another number of envs per worker) the
    worker keeps the fresh episodes it just reset into, and its carried state.
    """
    saved = _as_multi_env(saved)
    envs = saved["envs"]
    exact = len(envs) == len(collector.envs) and all(state is not None for state in envs)
    if exact:
        restored = [restore_env(env, state) for env, state in zip(collector.envs, envs)]
        exact = all(restored)  # a stack mismatch shows on the first env, before any is touched
    if exact:
        collector.obs = decode(saved["obs"])
        collector.state = tuple(t.clone() for t in saved["lstm"])
        collector.episode_starts = decode(saved["episode_starts"])
    restore_rngs(saved["rngs"])
    return exact


def worker_seed(base_seed: int, rank: int, start_step: int) -> int:
    """Seed of worker `rank`: base + rank for a new run. A resumed worker without a saved state
    (the trainer was killed) takes a seed derived from the step too, so it does not replay the
    games of the run's start."""
    if start_step == 0:
        return base_seed + rank
    return int(np.random.SeedSequence([base_seed + rank, start_step]).generate_state(1)[0])
