# Two commands do all the set-up (see README.md):
#   make run    install, start the embedded database, migrate, load demo data, serve
#   make test   install, then run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run test install bench lint

run: install
	$(BIN)/python manage.py serve

test: install
	$(BIN)/python -m pytest

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

bench: install
	$(BIN)/python bench/import_bench.py

lint: install
	$(BIN)/ruff check .
