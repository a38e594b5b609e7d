"""`evaluate.py --record-video DIR`: an mp4 of every game, written by gymnasium's RecordVideo.

The directory, a first frame and the mp4 writer are all checked before any game is played, so a
missing renderer or a read-only folder is one line at once, not found out after the games.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import gymnasium as gym

from a3c_torch.envs import ATARI_FRAME_SKIP, EnvSettings, is_atari, make_env
from a3c_torch.errors import UsageError, require_writable


def prepare_video_dir(video_dir: str) -> None:
    """The directory exists and takes files: checked before playing, not when the first mp4 is written."""
    path = Path(video_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{path}: --record-video needs a directory, and this is a file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot create the video directory: {exc.strerror or exc}") from None
    require_writable(path, "--record-video cannot write there")


def check_video_rendering(settings: EnvSettings, seed: int) -> None:
    """One frame drawn, and the mp4 writer importable, before any game is played: vector envs
    (CartPole, ...) draw with pygame-ce, RecordVideo writes with moviepy."""
    # Frames are drawn off screen: no window, and no pygame banner on stdout (--json - keeps it pure).
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import moviepy  # noqa: F401
    except ImportError:
        raise UsageError("--record-video needs moviepy to write mp4 files, and it is not installed (pip install -r requirements.txt)") from None
    probe = make_env(settings, seed=seed, train=False, render_mode="rgb_array")
    try:
        probe.reset(seed=seed)
        frame = probe.render()
    except gym.error.DependencyNotInstalled as exc:
        reason = (str(exc).strip().splitlines() or ["a renderer is missing"])[0]
        raise UsageError(f"--record-video: {settings.env_id} cannot draw its frames here: {reason} (pip install -r requirements.txt installs pygame-ce, which CartPole and the other classic-control envs draw with)") from None
    finally:
        probe.close()
    if frame is None:
        raise UsageError(f"--record-video: {settings.env_id} draws no frames (its render() returned nothing)")


def with_video(env, video_dir: str, settings: EnvSettings, checkpoint_path: Path):
    from gymnasium.wrappers import RecordVideo

    # An agent step is ATARI_FRAME_SKIP emulator frames at 60 Hz: 15 fps plays at game speed.
    fps = 60 // ATARI_FRAME_SKIP if is_atari(settings.env_id) else None
    prefix = f"{checkpoint_path.stem}-{settings.env_id.replace('/', '_')}"
    with warnings.catch_warnings():
        # RecordVideo warns about any existing folder, including the one we just made;
        # only files with our own names are replaced.
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return RecordVideo(env, video_dir, episode_trigger=lambda episode: True, name_prefix=prefix, fps=fps)
