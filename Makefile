# Everything a fresh machine needs: `make train` (the main job) and `make test`.
# Both create .venv and install the project with its dev extra on first use.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PEERS_STAMP := $(VENV)/.peers-stamp
# What the optional extra `peers` (the loaders bench compares with) needs from Debian:
# FFmpeg's shared libraries, which spdl loads at run time, and the headers and pkg-config
# files ffcv compiles against (libturbojpeg, OpenCV).
PEER_DEBS := libavutil57 libavcodec59 libavformat59 libavfilter8 libswscale6 \
	libswresample4 libavdevice59 pkg-config libturbojpeg0-dev libopencv-dev

# check-tasks: the default detection and segmentation jobs, run, recorded and checked.
.PHONY: setup train test test-quick test-cold check-tasks lint gpu-test docs docs-serve browser jpegtran clean \
	peer-libs peers bench-peers

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

peer-libs:
	@if dpkg -s $(PEER_DEBS) >/dev/null 2>&1; then echo "peer-libs: Debian packages present"; \
	else apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends $(PEER_DEBS); fi

# The dev install plus the peers extra: the peer tests run in `make test`.
$(PEERS_STAMP): $(STAMP)
	$(MAKE) peer-libs
	$(BIN)/python -m pip install -e '.[dev,peers]'
	touch $(PEERS_STAMP)

peers: $(PEERS_STAMP)

# The recorded peer comparison (issue 29): three bench runs on the shared photos and on
# the ImageNet-like copy, JSON into benchmarks/peers/, a table to paste into RESULTS.md.
bench-peers: $(PEERS_STAMP)
	$(BIN)/python benchmarks/bench_peers.py $(ARGS)

train: $(STAMP)
	$(BIN)/python -m dali_pipes.train $(ARGS)

# The default jobs of task=detection and task=segmentation as a user runs them (5-8 minutes
# each on two cores, too long for `make test`): each must end MARGIN above the same model
# untrained and within TOLERANCE of its recorded figure (benchmarks/task_runs.py), and is
# recorded again in benchmarks/train-task-<task>.json.
check-tasks: $(STAMP)
	$(BIN)/python benchmarks/task_runs.py $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Two pytest-xdist workers on the 2-core CI machine (one per core): the subprocess and
# torchrun tests wait on process start-up and I/O a good part of the time. Tests are
# handed out one at a time (--maxschedchunk=1), so the slow-marked ones, which run first,
# are shared by both workers: xdist's default first hand-out gives each worker a quarter
# of its share in one contiguous block, which put every slow test on the first worker.
# What several tests need and costs a training run or a build (a torchrun reference run,
# a preempted run, the wheel) is made once per run for both workers (tests/helpers/shared.py).
# mypy (30 s on a clean clone, no cache yet) runs beside the tests, in their idle moments;
# its report follows theirs, and either failing fails the target.
define pytest_beside_mypy
	@report=$$(mktemp); $(BIN)/mypy > $$report 2>&1 & typing=$$!; \
	$(BIN)/python -m pytest -n auto --maxschedchunk=1 $(1) $(ARGS); tests=$$?; \
	wait $$typing; typed=$$?; echo "mypy:"; cat $$report; rm -f $$report; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]
endef

# The tests write the bytecode of the project's and their own modules (into __pycache__,
# ignored by git) even where PYTHONDONTWRITEBYTECODE is set, as Python's images set it:
# each pytest worker, warm interpreter and command imports them anew, and compiling them
# every time cost the run about 57 CPU-seconds.
test test-quick: export PYTHONDONTWRITEBYTECODE :=

test: $(STAMP) $(PEERS_STAMP) browser jpegtran
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(call pytest_beside_mypy,--durations=15)

# The edit-test loop: lint, mypy and the unit, contract and parity tests that are not
# marked slow (no end-to-end run, no torchrun, no browser; the peers extra and chromium
# are not needed, their tests skip without them). `make test` before pushing runs it all.
QUICK := tests/unit tests/contract tests/parity -m "not slow"
test-quick: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(call pytest_beside_mypy,$(QUICK))

# `make test` as a new user runs it: a fresh clone of this checkout's HEAD in a temporary
# folder, `make train` there, then `make test` timed (benchmarks/cold_make_test.sh says
# what is and is not reused). Run it on a quiet machine; it prints the figures to record.
test-cold:
	bash benchmarks/cold_make_test.sh $(ARGS)

# The documentation site (mkdocs.yml, docs/): built strictly (a broken link or anchor, a
# docstring mkdocstrings cannot read, fails), offline. tests/e2e/test_docs_site.py builds
# it the same way and opens every page in Debian's chromium.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve --dev-addr 127.0.0.1:8000

# A real browser for the site's test: Debian's chromium and its WebDriver, when missing.
browser:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	  chromium chromium-driver; }

# libjpeg-turbo's jpegtran, with which `pack` stores JPEGs baseline (its tests need it).
jpegtran:
	@command -v jpegtran >/dev/null 2>&1 || \
	{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	  libjpeg-turbo-progs; }

gpu-test: $(STAMP)
	$(BIN)/python -m pytest -m gpu $(ARGS)

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache
