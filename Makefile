# Two commands for a fresh machine (Python 3.10+ with venv):
#   make train   installs into .venv (once) and trains with one worker per CPU core
#   make test    installs into .venv (once) and runs the test suite, two test processes at once
#                (TEST_JOBS=0 make test: one process, the tests in order)
#   make benchmark  training throughput with 1..<CPU cores> workers (see docs/benchmarks.md)
# Re-running is fast: the install step only runs again when a requirements file changes.

VENV ?= .venv
PYTHON ?= python3
NUM_PROCESSES ?= $(shell nproc 2>/dev/null || echo 8)
TRAIN_ARGS ?=
BENCHMARK_ARGS ?=
# Test processes (pytest-xdist): a second one overlaps the time tests spend starting processes and
# waiting on them. Tests that must not overlap (the distributed worlds: ports nothing reserves)
# share an xdist_group and run one after another.
TEST_JOBS ?= 2
INSTALLED := $(VENV)/.installed

.PHONY: train test benchmark install clean-venv

install: $(INSTALLED)

$(INSTALLED): requirements.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(INSTALLED)

# A stop by Ctrl-C or SIGTERM is a clean stop (the trainer writes its final checkpoint and says
# how to resume): the recipe returns 0 for the trainer's 130/143, so make adds no "Error 130".
train: $(INSTALLED)
	@echo "$(VENV)/bin/python train.py --num-processes $(NUM_PROCESSES) $(TRAIN_ARGS)"
	@trap true INT TERM; $(VENV)/bin/python train.py --num-processes $(NUM_PROCESSES) $(TRAIN_ARGS); \
	status=$$?; if [ $$status -eq 130 ] || [ $$status -eq 143 ]; then exit 0; fi; exit $$status

test: $(INSTALLED)
	$(VENV)/bin/python -m pytest -q -n $(TEST_JOBS) --dist loadgroup

# Is this machine training as fast as it should? The emulator alone, then training with 1, 2, ...,
# <CPU cores> workers (30 s each, a few minutes in all): steps/s and the scaling efficiency.
# Only meaningful on an otherwise idle machine. E.g. BENCHMARK_ARGS="--max-processes 4 --seconds 15"
benchmark: $(INSTALLED)
	$(VENV)/bin/python -m benchmarks.throughput $(BENCHMARK_ARGS)

clean-venv:
	rm -rf $(VENV)
