"""plan_resume (a3c_torch/resume.py): what a resume continues from, with which settings, and where;
every refusal raised there, and the run directory's lock held only where the run goes on.
(test_resume_safety.py checks the same decisions through the Trainer.)"""

from __future__ import annotations

import pytest

from a3c_torch.config import Config
from a3c_torch.errors import UsageError
from a3c_torch.resume import plan_resume
from a3c_torch.storage.run_lock import lock_run_dir
from test_resume_safety import make_run


def is_free(run_dir) -> bool:
    try:
        lock_run_dir(run_dir).release()
    except UsageError:
        return False
    return True


def test_a_resume_from_the_latest_checkpoint_continues_in_place_with_the_lock_held(tmp_path):
    run_dir = make_run(tmp_path, latest_step=1_000)
    plan = plan_resume(Config(resume=str(run_dir), max_steps=5_000, lr_schedule="constant"), {"max_steps", "lr_schedule"})
    try:
        assert plan.in_place and plan.run_dir == run_dir and plan.why_elsewhere is None
        assert plan.step == 1_000 and plan.path == run_dir / "checkpoints" / "latest.pt"
        assert (plan.cfg.env_id, plan.cfg.max_steps, plan.cfg.lr_schedule) == ("CartPole-v1", 5_000, "constant"), "the saved config, the flags given now on top"
        assert "max_steps 20000000 -> 5000" in plan.changed_settings and "lr_schedule linear -> constant" in plan.changed_settings
        assert not is_free(run_dir)
    finally:
        plan.lock.release()
    assert is_free(run_dir)


def test_an_older_checkpoint_goes_to_a_new_run_directory_and_leaves_the_old_one_unlocked(tmp_path):
    run_dir = make_run(tmp_path / "runs", latest_step=2_000, best_step=1_000)
    plan = plan_resume(Config(resume=str(run_dir / "checkpoints" / "best.pt"), max_steps=5_000), {"max_steps"})
    assert not plan.in_place and plan.lock is None and plan.step == 1_000
    assert "newer (step 2,000)" in plan.why_elsewhere
    assert plan.cfg.runs_dir == str(tmp_path / "runs"), "beside the old run"
    assert is_free(run_dir)


def test_refusals_are_raised_by_the_plan_and_leave_the_run_directory_unlocked(tmp_path):
    run_dir = make_run(tmp_path, latest_step=1_000)
    with pytest.raises(UsageError, match="trained with --hidden-size 16, not 32"):
        plan_resume(Config(resume=str(run_dir), hidden_size=32, max_steps=5_000), {"hidden_size", "max_steps"})
    with pytest.raises(UsageError, match="already at step 1,000 >= --max-steps 500"):
        plan_resume(Config(resume=str(run_dir), max_steps=500), {"max_steps"})
    assert is_free(run_dir)
    held = lock_run_dir(run_dir)
    try:
        with pytest.raises(UsageError, match="in use by another train.py"):
            plan_resume(Config(resume=str(run_dir), max_steps=5_000), {"max_steps"})
    finally:
        held.release()
