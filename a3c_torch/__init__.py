"""a3c_torch: A3C (Hogwild LSTM actor-critic) for Atari on one workstation."""
