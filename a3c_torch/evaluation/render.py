"""`evaluate.py --render`: watch the agent play in a small window, at the game's own speed.

The window is Tk's (Python's tkinter): it shows the env's RGB frames, scaled up, with no extra
package. Without a display, or without Tk, `evaluation.flags.check_display()` says so in one line before anything
is loaded or played; closing the window stops the evaluation.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from a3c_torch.envs import ATARI_FRAME_SKIP, EnvSettings, is_atari
from a3c_torch.errors import UsageError

TARGET_HEIGHT = 480  # pixels: Atari's 210-line frames are shown 2x, CartPole's 400 1x


class WindowClosed(Exception):
    """The person watching closed the window."""


class Window:
    """A Tk window showing RGB frames at `fps` frames per second at most."""

    def __init__(self, title: str, fps: float):
        import tkinter

        try:
            self.root = tkinter.Tk()
        except tkinter.TclError as exc:
            raise UsageError(f"--render: cannot open a window on display {os.environ.get('DISPLAY', '')!r}: {exc}") from None
        self.root.title(title)
        self.root.protocol("WM_DELETE_WINDOW", self._on_close)
        self.label = tkinter.Label(self.root, borderwidth=0)
        self.label.pack()
        self.tk = tkinter
        self.closed = False
        self.period = 1.0 / fps
        self.next_frame = time.monotonic()
        self.image = None  # Tk shows the image only while Python holds a reference to it

    def _on_close(self) -> None:
        self.closed = True

    def show(self, frame: np.ndarray) -> None:
        """Draw one frame (H x W x 3 uint8), then wait until it is time for the next one."""
        scale = max(1, round(TARGET_HEIGHT / frame.shape[0]))
        big = np.ascontiguousarray(np.repeat(np.repeat(frame[:, :, :3], scale, axis=0), scale, axis=1), dtype=np.uint8)
        height, width = big.shape[:2]
        self.image = self.tk.PhotoImage(data=b"P6 %d %d 255\n" % (width, height) + big.tobytes(), format="PPM")
        self.label.configure(image=self.image)
        self._pump()
        while True:  # keep the window responsive while waiting
            wait = self.next_frame - time.monotonic()
            if wait <= 0:
                break
            time.sleep(min(wait, 0.02))
            self._pump()
        self.next_frame = max(self.next_frame + self.period, time.monotonic() - self.period)

    def _pump(self) -> None:
        try:
            self.root.update()
        except self.tk.TclError:  # destroyed by the window manager
            self.closed = True
        if self.closed:
            raise WindowClosed

    def close(self) -> None:
        try:
            self.root.destroy()
        except self.tk.TclError:
            pass


class RenderToWindow(gym.Wrapper):
    """Shows every frame of an env made with render_mode="rgb_array" in a Window."""

    def __init__(self, env, window: Window):
        super().__init__(env)
        self.window = window

    def reset(self, **kwargs):
        result = self.env.reset(**kwargs)
        self.window.show(self.env.render())
        return result

    def step(self, action):
        result = self.env.step(action)
        self.window.show(self.env.render())
        return result

    def close(self):
        super().close()
        self.window.close()


def with_window(env, settings: EnvSettings, checkpoint_path: Path) -> RenderToWindow:
    """`env` (made with render_mode="rgb_array") shown in a window as it plays, at the game's own speed."""
    # Atari: one agent step is ATARI_FRAME_SKIP frames of a 60 Hz game, so 15 steps/s is its own speed.
    fps = 60 / ATARI_FRAME_SKIP if is_atari(settings.env_id) else float(env.metadata.get("render_fps") or 30)
    try:
        env.reset(seed=0)  # every game is reset with its own seed again before it is played
        env.render()  # before the window opens: a vector env's renderer may need pygame
    except gym.error.DependencyNotInstalled as exc:
        raise UsageError(f"--render: {settings.env_id} cannot draw its frames here: {str(exc).strip().splitlines()[0]}") from None
    return RenderToWindow(env, Window(f"{settings.env_id}: {checkpoint_path}", fps))
