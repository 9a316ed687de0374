# The two commands of the README: `make train` and `make test`. Both install what is missing first.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.attend-installed
# Debian packages the embedded data sets are built from, and Chromium, the headless browser the explorer's pages
# are tested in (tests/explore/test_browser.py, scripts/explorer_check.py)
DEB_PACKAGES := trans-de-en tuxpaint-stamps-default fonts-noto-color-emoji espeak-ng \
	asterisk-core-sounds-en asterisk-core-sounds-en-wav asterisk-core-sounds-fr asterisk-core-sounds-fr-wav \
	flight-of-the-amazon-queen chromium

.PHONY: install debs train test test-slow compare benchmark bench-scale lint clean

install: $(STAMP) debs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

debs:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	else \
		echo "Attend needs the Debian packages:$$missing"; \
		echo "run:  sudo apt-get update && sudo apt-get install -y$$missing   then run make again"; \
		exit 1; \
	fi

# the default experiment: Ding German->English, additive attention, on CPU; ARGS adds Hydra overrides
train: install
	$(PY) train.py $(ARGS)

test: install
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# the slower tier: the benchmark scripts end to end, DDP and sweep orchestration, the matrix's Luong and Transformer
# sweeps (CI runs it after make test)
test-slow: install
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

# every attention type on the dates and the shapes, then the comparison tables of docs/results.md (about an hour here)
ATTENTION_TYPES := additive,dot,scaled_dot,general,cosine,location,multihead,hard
COMPARE_DIR := outputs/compare
compare: install
	rm -rf $(COMPARE_DIR)
	$(PY) train.py -m experiment=dates attention=$(ATTENTION_TYPES) hydra.sweep.dir=$(COMPARE_DIR)/dates
	$(PY) train.py experiment=dates_transformer hydra.run.dir=$(COMPARE_DIR)/dates/transformer
	$(PY) train.py -m experiment=shapes attention=$(ATTENTION_TYPES) trainer.max_epochs=6 hydra.sweep.dir=$(COMPARE_DIR)/shapes
	$(PY) train.py experiment=shapes encoder=transformer decoder=transformer attention=multihead trainer.max_epochs=6 \
		hydra.run.dir=$(COMPARE_DIR)/shapes/transformer
	$(PY) scripts/compare_runs.py $(COMPARE_DIR)/dates --metrics test/exact test/alignment_error test/entropy \
		--doc docs/results.md --section dates
	$(PY) scripts/compare_runs.py $(COMPARE_DIR)/shapes --metrics test/bleu4 test/cider test/pointing test/entropy \
		--doc docs/results.md --section shapes

# training and decoding speed side by side, PASS/FAIL per target (scripts/benchmark.py; docs/performance.md,
# Performance); ARGS adds options, e.g. ARGS="--quick" or ARGS="--device cuda"
benchmark: install
	$(PY) scripts/benchmark.py $(ARGS)

# how the data layer scales with corpus size per modality (scripts/bench_scale.py): preparation time, peak RSS,
# second start, loader throughput against the model's demand, PASS/FAIL per goal; ARGS adds options, e.g.
# ARGS="--quick" or ARGS="--modalities text --text-sizes 10000,100000"
bench-scale: install
	$(PY) scripts/bench_scale.py $(ARGS)

lint: install
	$(VENV)/bin/ruff check src tests scripts benchmarks train.py eval.py predict.py

clean:
	rm -rf outputs multirun .pytest_cache
