"""`evaluate.py --num-processes N`: full games played by N processes at once.

Each game is played exactly as evaluate.py plays it alone (games.play_seeded_game: game i is reset
with seed + i and its actions are sampled from a generator seeded with seed + i), so the scores do
not depend on how many processes played them, nor in which order they finished. The players are
children like the trainer's (processes.py): they ignore Ctrl-C, which the main process handles
by killing them, and die with it. A player that crashes or is killed is reported, never waited for.
"""

from __future__ import annotations

import os
import queue
import time
from typing import Callable

import ale_py
import torch
import torch.multiprocessing as mp

from a3c_torch.child_context import PlayerContext
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.evaluation.games import EpisodeResult, play_seeded_game
from a3c_torch.messages import ChildFailed, GamePlayed
from a3c_torch.model import ActorCritic
from a3c_torch.processes import ChildStart, child_main, parent_alive, run_child, setup_child, start_children

POLL_S = 0.5  # how often the main process looks for a dead player while it waits for results


class PlayerFailed(Exception):
    """A game-playing process crashed or was killed; the message says which and why."""


def play_games_in_parallel(model: ActorCritic, settings: EnvSettings, games: int, seed: int, greedy: bool, device: torch.device,
                           num_processes: int, on_result: Callable[[int, EpisodeResult], None]) -> list[EpisodeResult]:
    """Games 0..games-1 (game i seeded with seed + i) on `num_processes` players; `on_result(i, result)`
    is called as each game ends (in the order they end). Returns the results in game order."""
    ctx = mp.get_context("spawn")
    tasks, from_players = ctx.Queue(), ctx.Queue()
    for i in range(games):
        tasks.put(i)
    players = min(num_processes, games)
    for _ in range(players):
        tasks.put(None)  # one "no more games" for each player
    cpu_model = ActorCritic.like(model)
    cpu_model.load_state_dict({name: tensor.cpu() for name, tensor in model.state_dict().items()})
    cpu_model.share_memory()  # sent to the players once, not copied per game
    contexts = [PlayerContext(index=k, model=cpu_model, settings=settings, device=str(device), greedy=greedy, seed=seed,
                              tasks=tasks, from_players=from_players, main_pid=os.getpid()) for k in range(players)]
    processes = {context.name: ctx.Process(target=child_main, args=(ChildStart(os.getpid()), player_main, context), daemon=True) for context in contexts}
    done: dict[int, EpisodeResult] = {}
    try:
        start_children(processes)
        while len(done) < games:
            message = _next_message(from_players, processes)
            if isinstance(message, ChildFailed):
                raise PlayerFailed(f"evaluation process {message.name} crashed:\n{message.traceback.rstrip()}")
            done[message.index] = message.result
            on_result(message.index, message.result)
    finally:
        # After a Ctrl-C or a failure the games not handed out stay in the queue's pipe, and its
        # feeder thread waits for a reader that is gone: exiting must not wait for it.
        tasks.cancel_join_thread()
        for process in processes.values():
            if process.is_alive():
                process.kill()  # players ignore SIGTERM, like every child of ours
        for process in processes.values():
            if process.pid is not None:
                process.join(timeout=5)
    return [done[i] for i in range(games)]


def _next_message(from_players, processes: dict) -> GamePlayed | ChildFailed:
    """The next result or error report; a player that died without one is a PlayerFailed.

    Dead players are looked for after every message, not only when none came: the survivors
    may send results faster than the poll interval, and the evaluation must still end."""
    while True:
        try:
            message = from_players.get(timeout=POLL_S)
        except queue.Empty:
            message = None
        if isinstance(message, ChildFailed):
            return message
        dead = {name: p.exitcode for name, p in processes.items() if p.exitcode not in (None, 0)}
        if dead:
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:  # a player that crashed sent its traceback before exiting
                try:
                    late = from_players.get(timeout=0.2)
                except queue.Empty:
                    continue
                if isinstance(late, ChildFailed):
                    return late
            name, code = next(iter(dead.items()))
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            raise PlayerFailed(f"evaluation process {name} {how} (out of memory?) before it reported its game")
        if message is not None:
            return message


def player_main(context: PlayerContext) -> None:
    """A player's entry point (spawned): play games until told there are no more; a crash is reported."""
    run_child(context.name, context.from_players, _play_games, context)


def _play_games(context: PlayerContext) -> None:
    """Play the games named on `tasks` until told there are no more."""
    setup_child(context.main_pid)
    # ALE's banner for every new emulator, as in the main process: it would bury the score lines.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    device = torch.device(context.device)
    model = context.model.to(device).eval()
    env = make_env(context.settings, seed=context.seed, train=False)
    try:
        while (i := context.tasks.get()) is not None:
            context.from_players.put(GamePlayed(i, play_seeded_game(model, env, device, context.greedy, context.seed + i)))
            if not parent_alive(context.main_pid):
                return
    finally:
        env.close()
