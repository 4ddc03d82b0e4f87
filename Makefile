# One entry point for developers and CI. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath .)
# The collection must sit at ansible_collections/llmops/sglang to be imported; a symlink serves pytest and ansible.
COLLECTIONS := $(ROOT)/.build/collections
COLLECTION_LINK := $(COLLECTIONS)/ansible_collections/llmops/sglang
# ansible-test resolves symlinks, so sanity runs on a copy of the tracked files instead.
SANITY_COPY := $(ROOT)/.build/sanity/ansible_collections/llmops/sglang
SANITY_COPY_NEW := $(ROOT)/.build/sanity-new/ansible_collections/llmops/sglang
TEST_HOME := $(ROOT)/.build/ansible-test-home

# Two ansible-core lines are tested: the newest that runs on Python 3.11 (2.19) and the newest release (2.21, Python >= 3.12).
# pyenv shims only answer for the selected version, so look at pyenv's install dirs first.
find_python = $(or $(firstword $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1))),$(shell command -v python$(1) 2>/dev/null))
PY_OLD ?= $(call find_python,3.11)
PY_NEW ?= $(call find_python,3.12)
VENV := $(ROOT)/.venv
VENV_NEW := $(ROOT)/.venv-2.21

export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export PYTHONPATH := $(COLLECTIONS)
export PYTHONDONTWRITEBYTECODE := 1
# ansible-core (2.19 and 2.21 alike) imports cryptography's DSA for its SSH agent client, and cryptography (51.0.1 here)
# warns at that import, on every ansible command: "CryptographyDeprecationWarning: DSA is deprecated ...". Not ours to
# fix, and not a warning a reader of make demo should stop at: that message alone is silenced (any other still shows).
comma := ,
export PYTHONWARNINGS := $(if $(PYTHONWARNINGS),$(PYTHONWARNINGS)$(comma))ignore:DSA is deprecated

N ?= 3

# promtool (make rules): the system's (.ci/run installs Debian's prometheus), else extracted from Debian's prometheus
# package into .build by make setup: no root, no service, nothing installed.
PROMTOOL ?= $(or $(shell command -v promtool 2>/dev/null),$(ROOT)/.build/promtool/usr/bin/promtool)

.PHONY: help setup test static checks sanity lint rules units local conformance integration demo fleet-up fleet-down fleet-status build packaging ee changelog-lint bench bench-quick clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

setup: $(VENV)/.done $(VENV_NEW)/.done $(COLLECTION_LINK) $(PROMTOOL) ## make both venvs, the collection link, promtool

$(ROOT)/.build/promtool/usr/bin/promtool:
	rm -rf $(ROOT)/.build/promtool $(ROOT)/.build/promtool-deb && mkdir -p $(ROOT)/.build/promtool-deb
	cd $(ROOT)/.build/promtool-deb && apt-get download prometheus
	dpkg-deb -x $(ROOT)/.build/promtool-deb/prometheus_*.deb $(ROOT)/.build/promtool
	rm -rf $(ROOT)/.build/promtool-deb
	$@ --version

$(VENV)/.done: requirements.txt tests/requirements.txt
	@test -n "$(PY_OLD)" || { echo "Python 3.11 not found (set PY_OLD=/path/to/python3.11)"; exit 1; }
	$(PY_OLD) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements.txt -r tests/requirements.txt 'ansible-core>=2.19,<2.20'
	touch $@

$(VENV_NEW)/.done: requirements.txt tests/requirements.txt
	@test -n "$(PY_NEW)" || { echo "Python 3.12 not found (set PY_NEW=/path/to/python3.12)"; exit 1; }
	$(PY_NEW) -m venv $(VENV_NEW)
	$(VENV_NEW)/bin/pip install -q --upgrade pip
	$(VENV_NEW)/bin/pip install -q -r requirements.txt 'ansible-core>=2.21,<2.22' pytest 'prometheus-client>=0.17'
	touch $@

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../../.. $@

test: setup ## everything CI runs: the static checks and the fleet integration groups side by side
	# The integration groups are most of the machine's CPU for most of the run; beside them, the static checks (see
	# static). Fail if either failed.
	$(MAKE) --no-print-directory -j2 static integration

# tests/local's stand-ins mostly wait: its wall time (13.5 min alone, 5 CPU min) is long, its CPU short. Niced behind
# the fleets, it got almost no CPU until they ended and then was most of the run's tail (CI, stop 42: the checks before
# it waited 35 min for 1 CPU min). So it runs from the start at the fleets' priority, beside the other checks, which
# are CPU work (lint, units, conformance, sanity: 8 CPU min) and stay niced so the fleet tests' deadlines are not
# starved; they take the CPU the fleets leave, and the whole of it once the fleets end.
# Their sub-makes start with an empty MAKEFLAGS: each sets its own job count (two beside each other here, one at a time
# in checks), which under a parent's jobserver GNU make does anyway, with a warning ("-j2 forced in submake").
static: setup ## tests/local beside the other checks (lint, changelog, rules, units, conformance, build, packaging, sanity)
	TIMEFORMAT='make static: %0R s wall, %0U s user + %0S s system CPU'; \
	  time MAKEFLAGS= $(MAKE) --no-print-directory -j2 --output-sync=recurse local checks

checks: setup ## the static checks but tests/local, niced, in this order: lint, changelog, rules, units, conformance, build, packaging, sanity
	TIMEFORMAT='make checks: %0R s wall, %0U s user + %0S s system CPU'; \
	  time MAKEFLAGS= nice -n 10 $(MAKE) --no-print-directory -j1 lint changelog-lint rules units conformance build packaging sanity

lint: setup ## ansible-lint, production profile (.config/ansible-lint.yml)
	PATH=$(VENV)/bin:$$PATH ansible-lint --offline

changelog-lint: setup ## antsibull-changelog checks the fragments
	$(VENV)/bin/antsibull-changelog lint

rules: setup ## promtool unit tests of the monitoring role's alert rules (tests/rules; promtool: Debian's prometheus)
	$(VENV)/bin/python tests/rules/render.py --promtool $(PROMTOOL) .build/rules

units: setup ## unit tests: no fleet, venv, network or ansible run (the plugins' on both ansible-core lines)
	$(VENV)/bin/python -m pytest -q tests/unit
	$(VENV_NEW)/bin/python -m pytest -q tests/unit/plugins

local: setup ## tests that spawn venvs, servers and ansible runs on this machine, no fleet (tests/local)
	TIMEFORMAT='make local: %0R s wall, %0U s user + %0S s system CPU'; time { \
	  $(VENV)/bin/python -m pytest -q tests/local && $(VENV_NEW)/bin/python -m pytest -q tests/local/plugins; }

conformance: setup ## the collection's SGLang knowledge against the real sglang release (fetched once into .build/)
	# pytest exits 5 when it collected nothing: for this suite that means it is broken, say so rather than pass.
	$(VENV)/bin/python -m pytest -q tests/conformance || { rc=$$?; [ $$rc -ne 5 ] || echo "conformance: no tests ran"; exit $$rc; }

sanity: setup ## ansible-test sanity on copies at ansible_collections/llmops/sglang, both ansible-core lines at once
	rm -rf $(ROOT)/.build/sanity $(ROOT)/.build/sanity-new && mkdir -p $(SANITY_COPY) $(SANITY_COPY_NEW)
	git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t $(SANITY_COPY)
	git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t $(SANITY_COPY_NEW)
	# ansible-test passes only HOME (not PIP_*) to the pip it runs, and fetches get-pip.py from outside the package
	# registries: give it a private HOME with the user's pip config and a get-pip stand-in in its cache.
	mkdir -p $(TEST_HOME)/.config/pip
	for conf in ~/.config/pip/pip.conf ~/.pip/pip.conf; do [ ! -f $$conf ] || cp $$conf $(TEST_HOME)/.config/pip/; done
	for venv in $(VENV) $(VENV_NEW); do \
	  ver=$$(grep -oP "pip='\\K[0-9.]+" $$venv/lib/python*/site-packages/ansible_test/_internal/python_requirements.py); \
	  install -D -m 0644 tests/tools/ansible_test_get_pip.py $(TEST_HOME)/.ansible/test/cache/get_pip_$${ver//./_}.py; \
	done
	# The two lines at once, each on its own copy (ansible-test writes tests/output inside it; its venvs in HOME are
	# per Python version): at the end of make test sanity runs alone, and one line keeps one of the two cores busy.
	# The newer line's output follows the older's whole, then both verdicts decide.
	cd $(SANITY_COPY_NEW) && git init -q && git add -A
	cd $(SANITY_COPY) && git init -q && git add -A
	cd $(SANITY_COPY_NEW) && { HOME=$(TEST_HOME) $(VENV_NEW)/bin/ansible-test sanity --python 3.12 --color no \
	  > $(ROOT)/.build/sanity-new.log 2>&1 && echo 0 > $(ROOT)/.build/sanity-new.rc || echo $$? > $(ROOT)/.build/sanity-new.rc; } & \
	  cd $(SANITY_COPY) && { HOME=$(TEST_HOME) $(VENV)/bin/ansible-test sanity --python 3.11 --color no && old=0 || old=$$?; }; \
	  wait; echo "== ansible-test sanity --python 3.12 (ansible-core 2.21)"; cat $(ROOT)/.build/sanity-new.log; \
	  new=$$(cat $(ROOT)/.build/sanity-new.rc); echo "sanity: ansible-core 2.19 exit $$old, 2.21 exit $$new"; \
	  [ "$$old" -eq 0 ] && [ "$$new" -eq 0 ]

build: setup ## build the collection tarball, install it, and check ansible-doc lists its modules
	rm -rf .build/dist .build/installed && mkdir -p .build/dist
	$(VENV)/bin/ansible-galaxy collection build --force --output-path .build/dist
	$(VENV)/bin/ansible-galaxy collection install -p .build/installed .build/dist/llmops-sglang-*.tar.gz
	ANSIBLE_COLLECTIONS_PATH=$(ROOT)/.build/installed $(VENV)/bin/ansible-doc -l llmops.sglang | tee .build/dist/modules.txt
	grep -q '^llmops.sglang.sglang_wait_ready' .build/dist/modules.txt

packaging: setup ## the real ansible-builder, ansible-galaxy and antsibull-changelog on this checkout (tests/packaging)
	$(VENV)/bin/python -m pytest -q tests/packaging

ee: setup ## write the execution environment's build context (.build/ee/context/Containerfile) with ansible-builder
	rm -rf .build/ee
	$(VENV)/bin/ansible-builder create -f execution-environment.yml -c .build/ee/context --output-filename Containerfile
	@echo "Build it with: podman build -t llmops-sglang-ee .build/ee/context"

integration: setup ## tests on local fleets of real systemd hosts, eight groups at once (root; boots and removes them)
	PATH=$(VENV)/bin:$$PATH PYTHON=$(VENV)/bin/python bash tests/integration/run_groups.sh

fleet-up: setup ## boot N local systemd hosts (default 3) and write inventories/local/hosts.yml
	$(VENV)/bin/python tests/fleet/fleet.py up --count $(N)

fleet-down: ## stop the local fleet and remove every netns, mount and cgroup it made
	python3 tests/fleet/fleet.py down

fleet-status: ## list the local fleet's hosts and whether they answer
	python3 tests/fleet/fleet.py status

demo: setup ## the main job on the embedded default: local fleet, deploy_k26.yml, fleet report, a no-op re-run
	$(VENV)/bin/python tests/fleet/fleet.py up --count $(N)
	@echo "== Preparing the hosts as the seeds found theirs (no pip, compressed-tensors 0.8.1, no Python headers)"
	PATH=$(VENV)/bin:$$PATH ansible-playbook -i inventories/local tests/fleet/demo_prepare.yml
	@echo "== Rolling out Kimi K2.6 (the SGLang stand-in at pace 0.1): canary first, judged by the canary analysis (the first records the yardstick; this stand-in decodes unpaced, so time per output token reads 0), then batches"
	PATH=$(VENV)/bin:$$PATH ansible-playbook -i inventories/local playbooks/deploy_k26.yml -e sglang_canary_analysis=canary
	@echo "== Running it again: nothing changes, nothing restarts"
	PATH=$(VENV)/bin:$$PATH ansible-playbook -i inventories/local playbooks/deploy_k26.yml | tee .build/demo-rerun.log
	@! grep -E '^gpu-[0-9]+ +: ' .build/demo-rerun.log | grep -vq ' changed=0 ' || { echo "demo: the re-run changed something"; exit 1; }
	@echo "== The fleet stays up for you to explore (ssh: see inventories/local/hosts.yml); 'make fleet-down' removes it."

bench: setup ## benchmarks on private local fleets (root; an hour or more with the 24-host rollout): docs/benchmarks.md/json
	PATH=$(VENV)/bin:$$PATH $(VENV)/bin/python bench/run.py

bench-quick: setup ## benchmark smoke run (root, ~2.5 min): bench/results/benchmarks-quick.md
	PATH=$(VENV)/bin:$$PATH $(VENV)/bin/python bench/run.py --quick

clean: ## remove build output and venvs (not the fleet: use fleet-down)
	rm -rf .build .venv .venv-2.21 tests/output
