"""Adam's momentum under Hogwild staleness: why the default beta1 is 0 from 3 workers on.

With N workers each update is computed on weights that N - 1 other updates have moved since:
a delayed gradient. Delay and momentum both keep pushing the weights the way they were going, so
together they overshoot. Here a noisy quadratic is minimised by SharedAdam with gradients taken
D updates late (D = 7: 8 workers; D = 1: 2 workers), deterministically. With the default momentum
(beta1 0.9) and 8 workers' delay the weights overshoot the minimum by a third of where they
started; without momentum they barely overshoot, less than 2 workers with momentum do. Issue 36:
8 workers at beta1 0.9 kept the Breakout policy near uniform for 0.4M steps; at beta1 0 they
learned from 0.1M (results/breakout-8-workers-beta1).
"""

from __future__ import annotations

import pytest
import torch

from a3c_torch.config import Config, default_adam_beta1, parse_args
from a3c_torch.optim import make_optimizer, set_adam_beta1


def overshoot(beta1: float, delay: int, lr: float = 0.05, updates: int = 300) -> float:
    """How far past the minimum (0) the mean weight goes, from 1, with gradients `delay` updates old."""
    torch.manual_seed(0)
    weights = torch.nn.Parameter(torch.ones(256))
    optimizer = make_optimizer("adam", [weights], lr, adam_beta1=beta1)
    history = [weights.detach().clone()]
    for _ in range(updates):
        stale = history[max(0, len(history) - 1 - delay)]
        weights.grad = stale + 0.3 * torch.randn(256)  # the gradient of |w|^2 / 2 at stale weights, plus noise
        optimizer.step()
        history.append(weights.detach().clone())
    return -float(torch.stack(history).mean(dim=1).min())


def test_stale_gradients_with_momentum_overshoot_and_without_it_they_do_not():
    eight_workers_momentum, eight_workers_plain, two_workers_momentum = overshoot(0.9, 7), overshoot(0.0, 7), overshoot(0.9, 1)
    assert eight_workers_momentum > 0.2  # a third of the way back past the minimum
    assert eight_workers_plain < 0.05
    assert eight_workers_plain < two_workers_momentum  # 8 workers without momentum are calmer than the 2-worker default
    assert overshoot(0.9, 0) < two_workers_momentum < eight_workers_momentum  # the more delay, the more overshoot


@pytest.mark.parametrize("workers, beta1", [(1, 0.9), (2, 0.9), (3, 0.0), (8, 0.0), (16, 0.0)])
def test_the_default_beta1_depends_on_the_workers_and_is_what_the_run_records(workers, beta1):
    cfg, _ = parse_args(["--num-processes", str(workers)])
    assert default_adam_beta1(workers) == beta1 == cfg.adam_beta1 == cfg.to_dict()["adam_beta1"]
    assert parse_args(["--num-processes", str(workers), "--adam-beta1", "0.5"])[0].adam_beta1 == 0.5


def test_a_run_from_before_the_setting_keeps_torchs_momentum():
    saved = Config(num_processes=8).to_dict()
    del saved["adam_beta1"]
    assert Config.from_dict(saved).adam_beta1 == 0.9


def test_the_optimizer_steps_with_the_runs_beta1_also_after_loading_a_saved_state():
    weights = torch.nn.Parameter(torch.ones(3))
    saved = make_optimizer("adam", [weights], 1e-3, adam_beta1=0.9).state_dict()
    resumed = make_optimizer("adam", [weights], 1e-3, adam_beta1=0.0)
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["betas"] == (0.9, 0.999)  # what load_state_dict brings back
    set_adam_beta1(resumed, 0.0)
    assert resumed.param_groups[0]["betas"] == (0.0, 0.999)


def test_resuming_a_run_from_before_the_setting_keeps_the_beta1_its_optimizer_state_holds():
    from a3c_torch.config import config_for_resume

    weights = torch.nn.Parameter(torch.ones(3))
    for stepped_with in (0.9, 0.0):
        saved_config = Config(num_processes=8).to_dict()
        del saved_config["adam_beta1"]
        data = {"config": saved_config, "global_step": 10, "optimizer": make_optimizer("adam", [weights], 1e-3, adam_beta1=stepped_with).state_dict()}
        cfg, explicit = parse_args(["--resume", "run"])
        assert config_for_resume(cfg, explicit, data).adam_beta1 == stepped_with
        cfg, explicit = parse_args(["--resume", "run", "--adam-beta1", "0.5"])
        assert config_for_resume(cfg, explicit, data).adam_beta1 == 0.5  # a flag given now applies from here on


def test_the_trainer_steps_with_the_runs_beta1_new_and_resumed(tmp_path):
    """The default for 3 workers reaches the shared optimizer; a resume with --adam-beta1 applies it."""
    from a3c_torch.trainer import Trainer

    quick = dict(env_id="CartPole-v1", hidden_size=16, evaluator=False, runs_dir=str(tmp_path))
    first = Trainer(Config(num_processes=3, **quick))
    assert first.optimizer.param_groups[0]["betas"] == (0.0, 0.999)
    first.started = 0.0  # save() outside of run()
    assert first.save("latest.pt", 100)
    first.run_lock.release()
    resumed = Trainer(Config(resume=str(first.run_dir), adam_beta1=0.5), explicit={"adam_beta1"})
    assert resumed.cfg.adam_beta1 == 0.5 and resumed.optimizer.param_groups[0]["betas"] == (0.5, 0.999)
