# Two commands do all the set-up (see README.md):
#   make run    install the app, start the embedded database, migrate, load demo data, serve
#   make dev    the same with Django's debug pages
#   make test   install the app and the tests' extras, then run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: run dev test install install-dev system-packages bench fuzz lint pool-check screenshots

# As in production: no debug pages (an error shows nobody settings or paths).
# exec: serve replaces the shell, and stops everything when make is stopped by its PID.
run: install
	exec $(BIN)/python manage.py serve

# The same with Django's debug pages, for a developer's own machine.
dev: install
	DEBUG=true exec $(BIN)/python manage.py serve

# The suite in TEST_WORKERS processes (pytest-xdist; each its own test database), as
# many as the machine has cores up to 4: most of a test's time is spent waiting on the
# servers and processes it starts. TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)

test: install-dev system-packages
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

# What the app runs on (requirements.txt): all that `make run` needs.
install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

# And the tests', benchmarks' and linter's extras (requirements-dev.txt includes requirements.txt).
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.installed

# Debian packages the tests drive: Chromium for the browser tests (Playwright's
# own download does not work on these machines), user-mode QEMU, which runs
# the embedded PostgreSQL as CPUs without AVX-512 (tests/test_portability.py),
# PgBouncer, which the tests put in front of it (tests/test_pooling.py), and
# a C compiler with the headers Citus is built with (tests/citus.py builds it
# once from ../shared/vendor into a cache; a header is looked for as the
# build will, by the compiler). Installed once, with sudo when not root.
# Where they cannot be had (no apt, no root or passwordless sudo: macOS,
# another Linux), the tests that need them skip and say why; everything else runs.
system-packages:
	@missing=""; test -x /usr/bin/chromium || missing=" chromium"; \
	  command -v qemu-x86_64 >/dev/null || missing="$$missing qemu-user"; \
	  test -x /usr/sbin/pgbouncer || missing="$$missing pgbouncer"; \
	  command -v gcc >/dev/null || missing="$$missing build-essential"; \
	  for header in curl/curl.h:libcurl4-openssl-dev lz4.h:liblz4-dev zstd.h:libzstd-dev; do \
	    printf '#include <%s>\n' "$${header%%:*}" | gcc -E -x c - >/dev/null 2>&1 || missing="$$missing $${header#*:}"; done; \
	  if [ -n "$$missing" ]; then SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	    if command -v apt-get >/dev/null && { [ -z "$$SUDO" ] || sudo -n true 2>/dev/null; }; then \
	      $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends $$missing \
	        || echo "Could not install:$$missing; the tests that need them skip." >&2; \
	    else echo "Not installed:$$missing (needs apt and root or sudo); the tests that need them skip." >&2; fi; fi

# The search, import, REST and MCP tests once more, with the database behind
# a PgBouncer in transaction mode, 4 server connections (tests/pgbouncer.py).
pool-check: install-dev system-packages
	$(BIN)/python -m tests.pgbouncer tests/test_search.py tests/test_import_export.py tests/test_api.py \
	  tests/test_mcp.py tests/test_service.py

# The screenshots docs/ shows, taken anew by the browser tests (a plain `make test`
# writes its screenshots to artifacts/ only, and leaves the checkout clean).
screenshots: install-dev system-packages
	UPDATE_DOCS_SCREENSHOTS=1 $(BIN)/python -m pytest tests/test_ui_browser.py tests/test_duplicates_browser.py tests/test_connector_browser.py

bench: install-dev
	$(BIN)/python bench/import_bench.py

# The long fuzz run (bench/fuzz.py): every fuzz test with FUZZ_EXAMPLES=6000
# unless given, figures per surface (inputs, server errors, leaks).
fuzz: install-dev
	$(BIN)/python bench/fuzz.py --examples $${FUZZ_EXAMPLES:-6000}

lint: install-dev
	$(BIN)/ruff check .
