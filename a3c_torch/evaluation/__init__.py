"""Playing a trained policy: `evaluate.py` (cli.py) and the trainer's evaluator process
(evaluator.py), both on the games of games.py. Nothing is imported here: the evaluator child
unpickles its entry point from this package, and must import no more than that module needs."""
