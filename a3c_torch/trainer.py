"""The main process: builds the shared model and optimizer, starts and watches the processes,
writes metrics and checkpoints, and shuts everything down cleanly whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

from a3c_torch.checkpoint import all_finite, load_checkpoint, remove_stale_temp_files, resolve_checkpoint, snapshot
from a3c_torch.checkpoint_files import CheckpointFiles
from a3c_torch.child_context import EvaluatorContext, WorkerContext
from a3c_torch.config import Config, changed_settings, config_for_resume, validate, with_resolved_lr
from a3c_torch.envs import probe_env
from a3c_torch.errors import UsageError, require_writable
from a3c_torch.evaluator import evaluator_main, resolve_device
from a3c_torch.messages import ChildFailed, Evaluation, WorkerState
from a3c_torch.metrics import Metrics
from a3c_torch.model import ActorCritic
from a3c_torch.lr_schedule import LrSchedule, rate_change_on_resume
from a3c_torch.optim import make_optimizer
from a3c_torch.preflight import check_num_steps
from a3c_torch.processes import ChildStart, StepCounter, StopFlag, child_main, start_children, start_resource_tracker
from a3c_torch.run_dir import create_run_dir, resume_command, run_dir_of, update_config, why_resume_elsewhere
from a3c_torch.run_lock import lock_run_dir
from a3c_torch.worker import worker_main
from a3c_torch.worker_state import unpack, worker_seed

JOIN_TIMEOUT_S = 5.0
EXIT_OK, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM, EXIT_SIGHUP = 0, 1, 130, 143, 129
# Each stops the run the same way (final checkpoint with the workers' states, the resume hint):
# Ctrl-C, `kill`/`timeout`/a scheduler, and a closed terminal or a dropped SSH session.
STOP_SIGNALS = {signal.SIGINT: EXIT_SIGINT, signal.SIGTERM: EXIT_SIGTERM, signal.SIGHUP: EXIT_SIGHUP}
HEALTH_CHECK_INTERVAL_S = 1.0
DIVERGED = ("training", "the shared model's weights are no longer finite (NaN or inf): the run diverged; try a lower --lr. "
            "Checkpoints are only written with finite weights, so latest.pt (if any) holds the last good ones.")


class Trainer:
    def __init__(self, cfg: Config, explicit: set[str] = frozenset()):
        validate(cfg)
        checkpoint, self.run_lock, self.resumed_in_place = None, None, False
        self.changed_settings: list[str] = []  # by the flags given with --resume
        if cfg.resume:
            checkpoint_path = resolve_checkpoint(cfg.resume)
            home = run_dir_of(checkpoint_path)
            # Locked before anything is read: the run's latest.pt must not change under us.
            busy = self._lock(home) if home is not None else None
            checkpoint = load_checkpoint(checkpoint_path, resumable=True)
            cfg, saved = config_for_resume(cfg, explicit, checkpoint), Config.from_dict(checkpoint["config"])
            self.changed_settings = changed_settings(saved, cfg) + rate_change_on_resume(saved, cfg, checkpoint["global_step"])
        check_num_steps(cfg)  # also a resumed run's saved setting, and a Trainer made in-process
        self.cfg = cfg = with_resolved_lr(cfg)
        self.lr_schedule = LrSchedule.of(cfg)
        self.eval_device = resolve_device(cfg.eval_device) if cfg.evaluator else None
        obs_shape, num_actions = probe_env(cfg)
        torch.manual_seed(cfg.seed)  # the initial weights, so that one-worker runs are reproducible
        self.model = ActorCritic(obs_shape, num_actions, cfg.hidden_size, cfg.model)
        self.optimizer = make_optimizer(cfg.optimizer, self.model.parameters(), cfg.lr)
        self.start_step, self.best_eval, self.previous_wall_time = 0, None, 0.0
        # Workers' RNG/env/LSTM states: read from the checkpoint, and collected when they stop.
        self.saved_worker_states, self.final_worker_states = {}, {}
        # Worker i of this trainer plays with seed SEED + WORKER_RANK_OFFSET + i (distributed
        # nodes use an offset so that no two workers in the world play the same games).
        self.worker_rank_offset = 0
        self.num_workers = cfg.num_processes
        self.sps_window = 1.0  # seconds over which steps/s is measured
        if checkpoint is not None:
            self._restore(checkpoint)
            self.run_dir = self._resume_where(checkpoint_path, home, busy, "runs_dir" in explicit)
        else:
            self.run_dir = self._new_run_dir()
            if self.run_dir is not None:
                self.run_lock = lock_run_dir(self.run_dir)
        self.checkpoints = CheckpointFiles(self.run_dir)
        # Shared after loading: load_state_dict may replace tensors with private ones.
        self.model.share_memory()
        self.optimizer.share_memory()
        self.stop_signal = None
        self.target_reached = False

    def _new_run_dir(self):
        return create_run_dir(self.cfg)

    def _lock(self, run_dir: Path) -> UsageError | None:
        """Take the run directory's lock; returns the refusal (in use, read-only) instead of
        raising it: a resume from an older checkpoint goes to a new run directory, and only
        reads this one."""
        try:
            self.run_lock = lock_run_dir(run_dir)
        except UsageError as refused:
            return refused
        return None

    def _resume_where(self, checkpoint_path: Path, home: Path | None, busy: UsageError | None, runs_dir_given: bool) -> Path:
        """The run directory to continue in: the checkpoint's own, unless that would overwrite a
        newer latest.pt (or the file is not in a run directory); then a new one (beside the old
        run unless --runs-dir says where), and the old run stays as it was, checkpoints and
        curves (a resume in place drops the events after its checkpoint's step)."""
        step = self.start_step
        why_new = why_resume_elsewhere(checkpoint_path, home, step)
        if why_new is None:
            if busy is not None:
                raise busy
            require_writable(home / "checkpoints", "not writable")
            remove_stale_temp_files(home / "checkpoints")  # left by a kill during a write
            self.resumed_in_place = True
            return home
        if self.run_lock is not None:
            self.run_lock.release()  # the old run is only read
            self.run_lock = None
        # The new run's best.pt is its own: its first evaluation writes one.
        self.best_eval = None
        if home is not None and not runs_dir_given:
            self.cfg.runs_dir = str(home.parent)
        run_dir = self._new_run_dir()
        if run_dir is not None:
            self.run_lock = lock_run_dir(run_dir)
        print(f"resuming from {checkpoint_path} (step {step:,}) in a new run directory: {why_new}", flush=True)
        return run_dir

    def _restore(self, checkpoint: dict) -> None:
        try:
            self.model.load_state_dict(checkpoint["model"])
            self.optimizer.load_state_dict(checkpoint["optimizer"])
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:  # the layout itself was checked at load
            raise UsageError(f"--resume {self.cfg.resume}: checkpoint does not fit this model: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}") from None
        self.start_step = int(checkpoint["global_step"])
        self.best_eval = checkpoint.get("best_eval_return")
        self.previous_wall_time = float(checkpoint.get("wall_time", 0.0))
        self.saved_worker_states = dict(checkpoint.get("worker_states") or {})

    def save(self, name: str, global_step: int, model_state=None, worker_states=None) -> bool:
        """Write a checkpoint of the shared model and optimizer; True if written (checkpoint_files.py)."""
        payload = {
            "model": model_state if model_state is not None else {k: v.clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.lr_schedule.in_saved_state(snapshot(self.optimizer.state_dict()), global_step),  # workers keep stepping it meanwhile
            "global_step": int(global_step),
            "config": self.cfg.to_dict(),
            "best_eval_return": self.best_eval,
            "wall_time": self.previous_wall_time + (time.monotonic() - self.started),
            **self._extra_checkpoint_fields(),
        }
        if worker_states:  # only at the end: mid-run states would not match the weights
            payload["worker_states"] = worker_states
        return self.checkpoints.write(name, global_step, payload)

    def _model_is_finite(self) -> bool:
        return all(all_finite(p) for p in self.model.parameters())

    # --- signals ---
    def _on_signal(self, signum, frame):
        if self.stop_signal is not None and signum == signal.SIGINT:
            print("\nsecond Ctrl-C: exiting now without a final checkpoint", file=sys.stderr, flush=True)
            for process in self.processes.values():
                if process.pid is not None and process.exitcode is None:
                    os.kill(process.pid, signal.SIGKILL)  # they would die with us anyway (parent-death signal)
            os._exit(EXIT_SIGINT)
        if self.stop_signal is not None:
            return  # already stopping; the first signal gives the exit code
        self.stop_signal = signum
        print(f"\n{signal.Signals(signum).name}: stopping workers and writing a final checkpoint (Ctrl-C again to exit at once)", file=sys.stderr, flush=True)

    # --- the run ---
    def run(self) -> int:
        self.processes = {}
        # Installed for the whole run (final checkpoint included), so a second Ctrl-C always works.
        # Under `nohup` SIGHUP is ignored on purpose, so that the run outlives its terminal: it stays so.
        handled = [s for s in STOP_SIGNALS if not (s == signal.SIGHUP and signal.getsignal(s) is signal.SIG_IGN)]
        previous = {s: signal.signal(s, self._on_signal) for s in handled}
        try:
            return self._run()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            if self.run_lock is not None:
                self.run_lock.release()

    def _create_processes(self) -> None:
        cfg = self.cfg
        ctx = mp.get_context(cfg.start_method)
        with tracker_leak_warning_off():
            start_resource_tracker()  # before the counter and queue below register their semaphores with it
        self.global_steps = StepCounter(ctx, self.start_step)
        self.stop_flag = StopFlag(ctx)
        self.to_trainer = ctx.Queue()
        shared = dict(cfg=cfg, shared_model=self.model, global_steps=self.global_steps, stop_flag=self.stop_flag, to_trainer=self.to_trainer, trainer_pid=os.getpid())
        for rank in range(self.num_workers):
            seed = worker_seed(cfg.seed, self.worker_rank_offset + rank, self.start_step)
            context = WorkerContext(**shared, rank=rank, optimizer=self.optimizer, seed=seed, saved_state=self.saved_worker_states.get(rank))
            self.processes[context.name] = ctx.Process(target=child_main, args=(ChildStart(os.getpid()), worker_main, context), name=f"a3c-worker-{rank}", daemon=True)
        if cfg.evaluator:
            context = EvaluatorContext(**shared, device=str(self.eval_device), best_so_far=self.best_eval)
            self.processes[context.name] = ctx.Process(target=child_main, args=(ChildStart(os.getpid()), evaluator_main, context), name="a3c-evaluator", daemon=True)

    def _run(self) -> int:
        cfg = self.cfg
        self._create_processes()
        self.started = time.monotonic()
        try:
            self.metrics = Metrics(self.run_dir, cfg.to_dict(), self.start_step, cfg.max_steps, self.lr_schedule.at, cfg.log_interval, resumed=self.resumed_in_place, sps_window=self.sps_window)
        except OSError as exc:
            raise UsageError(f"{self.run_dir}: cannot write TensorBoard events there ({exc.strerror or exc})") from None
        if self.run_dir is not None:
            print(f"run directory: {self.run_dir}", flush=True)
        if cfg.resume:
            exact = sorted(rank for rank in self.saved_worker_states if rank < self.num_workers)
            print(f"resuming at step {self.start_step:,}; workers continuing from their saved state: {exact or 'none (new seeds)'}", flush=True)
            if self.changed_settings:
                print(f"settings changed from step {self.start_step:,} on: {', '.join(self.changed_settings)}", flush=True)
                if self.resumed_in_place:  # a new run directory got its config.json with them
                    update_config(self.run_dir, cfg)
        envs = f" x {cfg.envs_per_process} envs" if cfg.envs_per_process > 1 else ""
        trunk = f" (model {cfg.model})" if self.model.is_image else ""
        print(f"training {cfg.env_id}{trunk} with {self.num_workers} worker process{'' if self.num_workers == 1 else 'es'}{envs}" + (f" and an evaluator on {self.eval_device}" if cfg.evaluator else "") + f", up to {cfg.max_steps:,} steps", flush=True)
        failure = None
        try:
            start_children(self.processes)  # armed against early signals and a dead trainer (processes.py)
            failure = self._watch()
        finally:
            # Also after an unexpected error in the trainer itself: stop the children, keep the work.
            self._shutdown()
            self._finish_world()
            step = self.global_steps.value
            saved = self.save("latest.pt", step, worker_states=self.final_worker_states)
            self.metrics.close(step)
        if failure != DIVERGED and not self._model_is_finite():  # said once, also when the watch loop found it
            failure = DIVERGED if failure is None else (failure[0], f"{failure[1]}\n{DIVERGED[1]}")
        return self._report(failure, step, saved)

    def _report(self, failure, step: int, saved: bool) -> int:
        """The last lines of a run; an unwritten final checkpoint is an error, said last."""
        checkpoints = self.run_dir / "checkpoints"
        if failure:
            name, detail = failure
            kept = f"its checkpoint is in {checkpoints}" if saved else "its final checkpoint was not written (see the last line)"
            print(f"error: {name} failed; the run stopped at step {step:,} and {kept}\n{detail}", file=sys.stderr, flush=True)
        if not saved:
            print(self.checkpoints.last_good(step), file=sys.stderr, flush=True)
        if failure or not saved:
            return EXIT_FAILED
        if self.stop_signal is not None:
            print(f"stopped at step {step:,}; resume with: {resume_command(self.run_dir)}", flush=True)
            return STOP_SIGNALS[self.stop_signal]
        print(f"done: {step:,} steps; checkpoints in {checkpoints}", flush=True)
        return EXIT_OK

    def _watch(self):
        """Feed metrics and write checkpoints until done, stopped, or a child fails."""
        next_checkpoint = time.monotonic() + self.cfg.checkpoint_interval
        next_health_check = time.monotonic() + HEALTH_CHECK_INTERVAL_S
        while True:
            failure = self._drain(timeout=0.2)
            step = self.global_steps.value
            if self.stop_signal is not None:
                # A child that dies after we were signalled most likely got the same signal
                # before it could ignore it (a process-group SIGTERM during its start-up).
                return failure
            self.metrics.tick(step)  # not after a signal: the bar stays above the stop message
            failure = failure or self._dead_child()
            if not failure and time.monotonic() >= next_health_check:
                next_health_check = time.monotonic() + HEALTH_CHECK_INTERVAL_S
                failure = None if self._model_is_finite() else DIVERGED
            if failure or self.stop_signal is not None or step >= self.cfg.max_steps or self.target_reached:
                return failure
            world = self._world_says_stop()
            if world:
                return world if isinstance(world, tuple) else None
            workers = [p for name, p in self.processes.items() if name.startswith("worker")]
            if workers and not any(p.is_alive() for p in workers):
                return None  # every worker finished on its own
            if time.monotonic() >= next_checkpoint:
                self.metrics.flush()  # after a kill -9, the curves then reach the checkpoint too
                self.save("latest.pt", step)
                next_checkpoint = time.monotonic() + self.cfg.checkpoint_interval

    # --- hooks for a distributed node (a3c_torch/distributed/node.py); no-ops on one machine ---
    def _extra_checkpoint_fields(self) -> dict:
        return {}

    def _on_stats(self, message) -> None:
        self.metrics.handle(message)

    def _world_says_stop(self):
        """True to stop, or (what, detail) if the world failed."""
        return False

    def _finish_world(self) -> None:
        pass

    def _drain(self, timeout: float):
        """Handle the children's messages; returns (name, traceback) if a child reported a crash."""
        failure = None
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.to_trainer.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return failure
            except Exception as exc:  # noqa: BLE001 - e.g. tensors from a child that has exited since
                print(f"warning: lost a message from a child process ({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)
                continue
            if isinstance(message, ChildFailed):
                failure = failure or (message.name, message.traceback)
            elif isinstance(message, WorkerState):
                self.final_worker_states[message.rank] = unpack(message.packed)
            elif isinstance(message, Evaluation):
                self._on_eval(message)
            else:
                self._on_stats(message)

    def _on_eval(self, evaluation: Evaluation) -> None:
        self.metrics.handle(evaluation)
        if evaluation.new_best:  # the evaluator's call (messages.Evaluation)
            previous, self.best_eval = self.best_eval, evaluation.mean
            if not self.save("best.pt", evaluation.step, model_state=evaluation.weights):
                self.best_eval = previous  # latest.pt must not claim a best that best.pt does not hold
        target = self.cfg.target_eval_return
        if target is not None and evaluation.mean >= target and not self.target_reached:
            self.target_reached = True
            self.metrics.say(f"evaluation mean {evaluation.mean:.2f} reached --target-eval-return {target:g}: stopping")

    def _dead_child(self):
        for name, process in self.processes.items():
            if process.exitcode not in (None, 0):
                # Give its traceback a moment to arrive on the queue before saying less.
                reported = self._drain(timeout=1.0)
                if reported:
                    return reported
                code = process.exitcode
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                return name, f"{name} died ({how}) without a traceback"
        return None

    def _shutdown(self) -> None:
        """Stop event, bounded joins (draining the queue so children can flush), then force."""
        self.stop_flag.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        started = [p for p in self.processes.values() if p.pid is not None]
        while any(p.is_alive() for p in started) and time.monotonic() < deadline:
            self._drain(timeout=0.1)
        for process in started:
            if process.is_alive():  # children ignore SIGTERM: a straggler is killed
                process.kill()
            process.join()
        self._drain(timeout=0.1)  # what the children flushed just before exiting (worker states)


@contextlib.contextmanager
def tracker_leak_warning_off():
    """Start multiprocessing's resource tracker without its "leaked semaphore objects" warning.
    A trainer that exits at once (a second Ctrl-C) or is killed leaves its semaphores to the
    tracker, which removes them, as designed, and then warns as if that were a bug. The tracker
    takes its warning filters from PYTHONWARNINGS when it starts, so the filter is set only then."""
    previous = os.environ.get("PYTHONWARNINGS")
    ours = "ignore::UserWarning:multiprocessing.resource_tracker"
    os.environ["PYTHONWARNINGS"] = f"{previous},{ours}" if previous else ours
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = previous


def train(cfg: Config, explicit: set[str] = frozenset()) -> int:
    return Trainer(cfg, explicit).run()
