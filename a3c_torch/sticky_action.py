"""The action that ALE repeats on a sticky frame: the one piece of a game that its saved states
leave out.

With sticky actions (repeat_action_probability p), every emulated frame either takes the action
passed to `act` or, with probability p, repeats the action held from the frame before. ALE holds
that action in its environment object, outside `ALEState`: `cloneState`/`restoreState` carry the
emulator and its RNG but not it, so a restored game repeats whatever its new host held last, and
a resumed run departs from the original (8 of 40 mid-game Breakout restores did, on both env
stacks). ALE has no call that reads or sets it, so both are done by experiment:

- setting it: from the saved state, `act(action)` for PROBE_FRAMES frames (one of them takes the
  action, which is held from then on), then restore the state again;
- reading it: play PROBE_FRAMES no-op frames from the state, then the same after setting each
  candidate in turn; the first candidate that gives the same emulator states frame by frame
  plays like the held action (any frame that repeats it plays it; the first frame that does
  not ends its influence), and is left held.
"""

from __future__ import annotations

import ale_py

# A held action outlives n frames of another one with probability p^n: 1e-19 at p = 0.25.
PROBE_FRAMES = 32


def held_action(ale: ale_py.ALEInterface) -> int | None:
    """The action `ale` holds for its sticky frames (None without sticky actions). The game is
    left as it was: the same state, the same held action. (Only the screen buffer, which
    restoreState does not redraw, shows a probe frame until the next `act`; both env stacks read
    screens only after an `act`.)"""
    if ale.getFloat("repeat_action_probability") == 0.0:
        return None
    state = ale.cloneState(include_rng=True)
    played = _noop_frames(ale, state)
    for action in ale.getLegalActionSet():
        set_held_action(ale, action.value, state)
        if _noop_frames(ale, state) == played:
            set_held_action(ale, action.value, state)
            return action.value
    raise RuntimeError("no action plays like the held one: the emulator is not deterministic")


def set_held_action(ale: ale_py.ALEInterface, action: int, state: ale_py.ALEState) -> None:
    """Make `action` the held one and put the game back in `state`."""
    ale.restoreState(state)
    for _ in range(PROBE_FRAMES):
        ale.act(ale_py.Action(action))
    ale.restoreState(state)


def _noop_frames(ale: ale_py.ALEInterface, state: ale_py.ALEState) -> list[bytes]:
    ale.restoreState(state)
    frames = []
    for _ in range(PROBE_FRAMES):
        ale.act(ale_py.Action.NOOP)
        frames.append(ale.cloneState(include_rng=True).serialize())
    return frames
