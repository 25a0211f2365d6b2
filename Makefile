# Two commands do everything on a fresh machine:  make book   and   make test
# Notebooks are executed (make execute) and checked (make test: conftest.py) in one pinned numeric
# environment, tools/numeric_env.py, so stored outputs reproduce on any x86-64 CPU.
SHELL := /bin/bash
# The Python that builds .venv: one in pyproject.toml's requires-python (make PYTHON=python3.12 test).
PYTHON ?= python3
PY    := .venv/bin/python
STAMP := .venv/.installed
RANGE := .venv/.python-range
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg

.PHONY: book book-execute check-book lab test check export exercises execute test-pretrained bench lock clean help

help:
	@echo "make book         build the HTML book into _build/html (offline, from stored outputs)"
	@echo "make test         lint + export check + unit tests + nbval over every chapter (what CI runs)"
	@echo "make PYTHON=python3.12 test   the same, with .venv built by another Python (3.11 to 3.14)"
	@echo "make check        fast checks only: ruff, notebook->package sync, exercise blanks, and"
	@echo "                  (when requirements.txt changes) that the lock installs on Python 3.11 to 3.14"
	@echo "make lab          open the chapters in JupyterLab, in the course's environment"
	@echo "make check-book   build the book, then check every page in Chromium (part of make test)"
	@echo "make export       regenerate gpt2_course/*.py from the chapters' '#| export' cells"
	@echo "make exercises    regenerate the blank exercise notebooks from the solutions"
	@echo "make execute NB=chapters/03_embeddings.ipynb   re-run one notebook top to bottom, in place"
	@echo "make book-execute re-execute every chapter (Jupyter Book cache) and build"
	@echo "make test-pretrained  tests against OpenAI's gpt2 weights (needs the hub or its cache)"
	@echo "make bench        run the benchmarks in benchmarks/"
	@echo "make lock         re-pin requirements.txt to the packages in .venv"

# $(PYTHON) must lie in requires-python and have ensurepip (Debian: python3-venv), else
# tools/check_python_range.py says which Pythons work and how to pick one; a .venv without pip (made
# without ensurepip) is rebuilt. torch first, pinned; if .venv already holds it (the CPU build, as
# book/running.md tells Linux learners to install first), pip installs nothing more.
# pip byte-compiles one file at a time (half the install); compileall -j 0 does it on every core. Its
# exit status is ignored, as pip ignores it: a few packages ship test files in other Python dialects
# that never compile.
$(STAMP): requirements.txt pyproject.toml
	@test -x .venv/bin/pip || { command -v $(PYTHON) > /dev/null || \
	  { echo "$(PYTHON) not found: install Python 3.11 to 3.14, or name one: make PYTHON=python3.12 test"; exit 1; }; \
	  $(PYTHON) tools/check_python_range.py --interpreter && rm -rf .venv && $(PYTHON) -m venv .venv; }
	@$(PY) tools/check_python_range.py --interpreter
	$(PY) -m pip install --quiet --no-compile torch==2.13.0
	$(PY) -m pip install --quiet --no-compile -r requirements.txt
	$(PY) -m compileall -q -j 0 .venv/lib > /dev/null 2>&1 || true
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

book: $(STAMP)
	.venv/bin/jupyter-book build . --warningiserror --keep-going
	@echo "open _build/html/index.html"

# Every page of the built book in Debian's Chromium (apt-get install chromium), offline;
# screenshots of each chapter land in _build/screenshots/ (tools/check_book.py).
check-book: book
	$(PY) tools/check_book.py

# JupyterLab from .venv, rooted at the repository and opened on chapters/ (make lab LAB_ARGS=--no-browser),
# in the pinned numeric environment: a learner's outputs then match the book's to the last digit.
# Jupyter refuses to run as root without --allow-root (containers, CI).
lab: $(STAMP)
	$(PY) tools/numeric_env.py -- .venv/bin/jupyter lab --ServerApp.default_url=/lab/tree/chapters \
	  $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

book-execute: $(STAMP)
	mkdir -p _build
	sed -e 's/execute_notebooks: "off"/execute_notebooks: cache/' -e 's|book_html: book/_ext|book_html: ../book/_ext|' \
	  _config.yml > _build/_config_execute.yml
	$(PY) tools/numeric_env.py -- .venv/bin/jupyter-book build . --config _build/_config_execute.yml \
	  --warningiserror --keep-going

# Every pin of requirements.txt resolves at both ends of requires-python (pip --dry-run, nothing
# installed); re-run only when the lock, the range or the check changes, as it reads the index.
$(RANGE): requirements.txt pyproject.toml tools/check_python_range.py | $(STAMP)
	$(PY) tools/check_python_range.py
	touch $@

check: $(STAMP) $(RANGE)
	.venv/bin/ruff check gpt2_course tools tests benchmarks book/_ext conftest.py
	$(PY) tools/export.py --check
	$(PY) tools/check_api.py
	$(PY) tools/exercises.py --check
	$(PY) tools/check_numbers.py

export: $(STAMP)
	$(PY) tools/export.py

exercises: $(STAMP)
	$(PY) tools/exercises.py

execute: $(STAMP)
	$(PY) tools/execute.py $(NB)

test: $(STAMP) check
	$(PY) tools/numeric_env.py --describe
	$(PY) -m pytest tests chapters $(NBVAL) -q
	$(MAKE) check-book

test-pretrained: $(STAMP)
	GPT2_COURSE_PRETRAINED=1 $(PY) -m pytest tests -q -m pretrained

bench: $(STAMP)
	for b in benchmarks/*.py; do $(PY) $$b || exit 1; done

# Re-pin requirements.txt to what .venv holds now (after deliberately upgrading a package).
lock: $(STAMP)
	{ sed -n '1,3p' requirements.txt; echo "torch==2.13.0"; \
	  .venv/bin/pip freeze --exclude-editable | grep -v -e '^torch==' -e '^-e '; } > requirements.tmp
	mv requirements.tmp requirements.txt

clean:
	rm -rf _build .jupyter_cache
