# Two commands do all the set-up (see README.md):
#   make run    install, start the embedded database, migrate, load demo data, serve
#   make test   install, then run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run test install chromium bench lint

run: install
	$(BIN)/python manage.py serve

test: install chromium
	$(BIN)/python -m pytest

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

# The browser tests drive Debian's Chromium; Playwright's own download does not
# work on these machines. Installed once, with sudo when not root.
chromium:
	@test -x /usr/bin/chromium || { SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium; }

bench: install
	$(BIN)/python bench/import_bench.py

lint: install
	$(BIN)/ruff check .
