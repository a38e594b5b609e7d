"""evaluate.py --render: one clear line and exit 2 without a display; a window that shows the frames
at the game's speed where there is one (under Xvfb, when it is installed)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time

import numpy as np
import pytest

from helpers import run_command


def test_without_a_display_it_is_one_line_and_exit_2_before_any_work(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    started = time.monotonic()
    # No such checkpoint either: the display is checked first, before anything is loaded.
    result = run_command("evaluate.py", "--checkpoint", tmp_path / "missing.pt", "--render", timeout=120, env=env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "evaluate.py: error: --render needs a display to open a window, and DISPLAY is not set (a headless machine or an "
        "ssh session without X forwarding); use --record-video DIR to watch the games afterwards"]
    assert not result.stdout and time.monotonic() - started < 60


def test_a_display_that_cannot_be_reached_is_one_line_too(tmp_path):
    pytest.importorskip("tkinter")
    from a3c_torch.errors import UsageError
    from a3c_torch.evaluation.render import Window

    os.environ["DISPLAY"], previous = ":4321", os.environ.get("DISPLAY")
    try:
        with pytest.raises(UsageError, match="cannot open a window on display ':4321'") as caught:
            Window("test", fps=30)
        assert "\n" not in str(caught.value)
    finally:
        os.environ.pop("DISPLAY") if previous is None else os.environ.__setitem__("DISPLAY", previous)


def read_xwd(data: bytes) -> np.ndarray:
    """An `xwd -root` screenshot (ZPixmap, 32 bits per pixel) as H x W x 3 RGB."""
    header = struct.unpack(">25I", data[:100])
    size, width, height, byte_order, bits, per_line, colours = header[0], header[4], header[5], header[7], header[11], header[12], header[19]
    assert bits == 32
    pixels = np.frombuffer(data[size + 12 * colours:size + 12 * colours + per_line * height], np.uint8).reshape(height, per_line)
    pixels = pixels[:, :4 * width].reshape(height, width, 4)
    return pixels[:, :, [2, 1, 0]] if byte_order == 0 else pixels[:, :, [1, 2, 3]]


@pytest.fixture
def xvfb():
    if not (shutil.which("Xvfb") and shutil.which("xwd")):
        pytest.skip("needs Xvfb and xwd (apt install xvfb x11-apps)")
    pytest.importorskip("tkinter")
    display = f":{400 + os.getpid() % 500}"
    server = subprocess.Popen(["Xvfb", display, "-screen", "0", "640x480x24", "-nolisten", "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    previous = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(["xwd", "-root", "-silent"], capture_output=True).returncode != 0:
            assert time.monotonic() < deadline and server.poll() is None, "Xvfb did not start"
            time.sleep(0.2)
        yield display
    finally:
        os.environ.pop("DISPLAY") if previous is None else os.environ.__setitem__("DISPLAY", previous)
        server.kill()
        server.wait()


def test_the_window_shows_the_frames_at_the_speed_asked(xvfb):
    from a3c_torch.evaluation.render import Window, WindowClosed

    frame = np.zeros((210, 160, 3), np.uint8)
    frame[:, :80] = (200, 60, 20)  # an Atari-sized frame: left half one colour, right half black
    window = Window("test", fps=20)
    started = time.monotonic()
    for _ in range(10):
        window.show(frame)
    elapsed = time.monotonic() - started
    assert 0.4 <= elapsed < 3.0, elapsed  # 10 frames at 20 per second: about 0.45 s after the first
    screen = read_xwd(subprocess.run(["xwd", "-root", "-silent"], capture_output=True, check=True).stdout)
    shown = np.all(screen == (200, 60, 20), axis=2)
    assert shown.sum() == 420 * 160, shown.sum()  # drawn 2x: 420 x 320 pixels, half of them in colour
    window._on_close()  # as the window manager's close button does
    with pytest.raises(WindowClosed):
        window.show(frame)
    window.close()
