"""The main process: builds the shared model and optimizer, starts and watches the processes,
writes metrics and checkpoints, and shuts everything down cleanly whatever happens.
"""

from __future__ import annotations

import os
import signal
import time

import torch
import torch.multiprocessing as mp

from a3c_torch.child_context import EvaluatorContext, WorkerContext
from a3c_torch.config import Config, validate, with_resolved_lr
from a3c_torch.envs import probe_env
from a3c_torch.errors import UsageError
from a3c_torch.evaluation.evaluator import evaluator_main, resolve_device
from a3c_torch.lr_schedule import LrSchedule
from a3c_torch.messages import ChildFailed, Evaluation, WorkerState
from a3c_torch.metrics import Metrics
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer, set_adam_beta1
from a3c_torch.preflight import check_num_steps
from a3c_torch.processes import Children, StepCounter, StopFlag, start_resource_tracker
from a3c_torch.resume import plan_resume, restore_weights
from a3c_torch.run_end import DIVERGED, exit_at_once, report, say_stopping, stop_signals_handled, with_divergence
from a3c_torch.storage.checkpoint import all_finite, snapshot
from a3c_torch.storage.checkpoint_files import CheckpointFiles
from a3c_torch.storage.run_dir import create_run_dir
from a3c_torch.storage.run_lock import lock_run_dir
from a3c_torch.worker import worker_main
from a3c_torch.worker_state import unpack, worker_seed

JOIN_TIMEOUT_S = 5.0
HEALTH_CHECK_INTERVAL_S = 1.0


class Trainer:
    def __init__(self, cfg: Config, explicit: set[str] = frozenset()):
        validate(cfg)
        plan = plan_resume(cfg, explicit) if cfg.resume else None  # raises what stops a resume
        cfg = plan.cfg if plan else cfg
        check_num_steps(cfg)  # also a resumed run's saved setting, and a Trainer made in-process
        self.cfg = cfg = with_resolved_lr(cfg)
        self.lr_schedule = LrSchedule.of(cfg)
        self.eval_device = resolve_device(cfg.eval_device) if cfg.evaluator else None
        obs_shape, num_actions = probe_env(cfg)
        torch.manual_seed(cfg.seed)  # the initial weights, so that one-worker runs are reproducible
        self.model = ActorCritic(obs_shape, num_actions, cfg.hidden_size, cfg.model)
        self.optimizer = make_optimizer(cfg.optimizer, self.model.parameters(), cfg.lr, cfg.adam_beta1)
        self.start_step, self.best_eval, self.previous_wall_time = 0, None, 0.0
        # Workers' RNG/env/LSTM states: read from the checkpoint, and collected when they stop.
        self.saved_worker_states, self.final_worker_states = {}, {}
        # Worker i of this trainer plays with seed SEED + WORKER_RANK_OFFSET + i (distributed
        # nodes use an offset so that no two workers in the world play the same games).
        self.worker_rank_offset = 0
        self.num_workers = cfg.num_processes
        self.sps_window = 1.0  # seconds over which steps/s is measured
        self.resume_plan, self.resumed_in_place = plan, bool(plan and plan.in_place)
        self.run_lock = plan.lock if plan else None
        if plan:
            self._restore(plan.checkpoint)
        if plan and plan.in_place:
            self.run_dir = plan.run_dir
        else:
            self.best_eval = None  # a new run directory's best.pt is its own: its first evaluation writes one
            self.run_dir = self._new_run_dir()
            if self.run_dir is not None:
                self.run_lock = lock_run_dir(self.run_dir)
            if plan:
                print(f"resuming from {plan.path} (step {plan.step:,}) in a new run directory: {plan.why_elsewhere}", flush=True)
        self.checkpoints = CheckpointFiles(self.run_dir)
        # Shared after loading: load_state_dict may replace tensors with private ones.
        self.model.share_memory()
        self.optimizer.share_memory()
        self.children, self.stop_signal, self.target_reached = Children(), None, False

    def _new_run_dir(self):
        return create_run_dir(self.cfg)

    def _restore(self, checkpoint: dict) -> None:
        restore_weights(checkpoint, self.model, self.optimizer, self.cfg.resume)
        set_adam_beta1(self.optimizer, self.cfg.adam_beta1)
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

    def _on_signal(self, signum, frame):
        if self.stop_signal is not None and signum == signal.SIGINT:
            exit_at_once(self.children)  # a second Ctrl-C
        if self.stop_signal is None:  # else already stopping: the first signal gives the exit code
            self.stop_signal = signum
            say_stopping(signum)

    def run(self) -> int:
        try:
            with stop_signals_handled(self._on_signal):
                return self._run()
        finally:
            if self.run_lock is not None:
                self.run_lock.release()

    def _create_processes(self) -> None:
        cfg, ctx = self.cfg, mp.get_context(self.cfg.start_method)
        start_resource_tracker()  # before the counter and queue below register their semaphores with it
        self.global_steps, self.stop_flag, self.to_trainer = StepCounter(ctx, self.start_step), StopFlag(ctx), ctx.Queue()
        shared = dict(cfg=cfg, shared_model=self.model, global_steps=self.global_steps, stop_flag=self.stop_flag, to_trainer=self.to_trainer, trainer_pid=os.getpid())
        contexts = [WorkerContext(**shared, rank=rank, optimizer=self.optimizer, seed=worker_seed(cfg.seed, self.worker_rank_offset + rank, self.start_step),
                                  saved_state=self.saved_worker_states.get(rank)) for rank in range(self.num_workers)]
        if cfg.evaluator:
            contexts.append(EvaluatorContext(**shared, device=str(self.eval_device), best_so_far=self.best_eval))
        for context in contexts:
            self.children.add(ctx, evaluator_main if isinstance(context, EvaluatorContext) else worker_main, context)

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
        if self.resume_plan:
            self.resume_plan.announce(cfg, self.start_step, self.num_workers)
        envs = f" x {cfg.envs_per_process} envs" if cfg.envs_per_process > 1 else ""
        trunk = f" (model {cfg.model})" if self.model.is_image else ""
        print(f"training {cfg.env_id}{trunk} with {self.num_workers} worker process{'' if self.num_workers == 1 else 'es'}{envs}" + (f" and an evaluator on {self.eval_device}" if cfg.evaluator else "") + f", up to {cfg.max_steps:,} steps", flush=True)
        failure = None
        try:
            self.children.start()  # armed against early signals and a dead trainer (processes.py)
            failure = self._watch()
        finally:
            # Also after an unexpected error in the trainer itself: stop the children, keep the work.
            self.children.stop(self.stop_flag, lambda seconds: self._drain(timeout=seconds), JOIN_TIMEOUT_S)
            self._finish_world()
            step = self.global_steps.value
            saved = self.save("latest.pt", step, worker_states=self.final_worker_states)
            self.metrics.close(step)
        return self._report(with_divergence(failure, self._model_is_finite()), step, saved)

    def _report(self, failure, step: int, saved: bool) -> int:
        return report(failure, step, saved, self.run_dir, self.checkpoints, self.stop_signal)

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
            if self.children.workers_finished():
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

    # --- the children's messages (messages.py) ---
    def _drain(self, timeout: float):
        """Handle the children's messages; returns (name, traceback) if a child reported a crash."""
        failure = None
        for message in self.children.read(self.to_trainer, timeout):
            if isinstance(message, ChildFailed):
                failure = failure or (message.name, message.traceback)
            elif isinstance(message, WorkerState):
                self.final_worker_states[message.rank] = unpack(message.packed)
            elif isinstance(message, Evaluation):
                self._on_eval(message)
            else:
                self._on_stats(message)
        return failure

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
        dead = self.children.first_dead()
        return dead and (self._drain(timeout=1.0) or dead)  # its traceback may still be on its way


def train(cfg: Config, explicit: set[str] = frozenset()) -> int:
    return Trainer(cfg, explicit).run()
