# Two commands for a fresh machine (Python 3.10+ with venv):
#   make train   installs into .venv (once) and trains with one worker per CPU core
#   make test    installs into .venv (once) and runs the test suite
# Re-running is fast: the install step only runs again when a requirements file changes.

VENV ?= .venv
PYTHON ?= python3
NUM_PROCESSES ?= $(shell nproc 2>/dev/null || echo 8)
TRAIN_ARGS ?=
INSTALLED := $(VENV)/.installed

.PHONY: train test install clean-venv

install: $(INSTALLED)

$(INSTALLED): requirements.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(INSTALLED)

train: $(INSTALLED)
	$(VENV)/bin/python train.py --num-processes $(NUM_PROCESSES) $(TRAIN_ARGS)

test: $(INSTALLED)
	$(VENV)/bin/python -m pytest -q

clean-venv:
	rm -rf $(VENV)
