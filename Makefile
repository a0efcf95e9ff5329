# gpufleet.node developer entry points. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
COLLECTION_LINK := .build/collections/ansible_collections/gpufleet/node
RELEASES ?= bookworm sid
SCENARIO ?= default
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.build/collections
export PY_COLORS := 0
export ANSIBLE_FORCE_COLOR := 0
# The Kubernetes lab the scenarios use writes its inventory here (tests/run_stages.py runs a second lab elsewhere).
export GPUFLEET_LAB_INVENTORY_DIR ?= $(CURDIR)/.build/lab/inventory
# The scenarios and the lab's own tests run Ansible with Mitogen's strategy (mitogen_linear): the same plays for less
# CPU (docs/development.md: What make test does). MITOGEN=0 runs them with Ansible's own strategy.
MITOGEN ?= 1
MITOGEN_STRATEGIES = $(shell $(BIN)/python -c 'import ansible_mitogen, os; print(os.path.dirname(ansible_mitogen.__file__))')/plugins/strategy
ifeq ($(MITOGEN),1)
molecule molecules kubelab-test: export ANSIBLE_STRATEGY_PLUGINS = $(MITOGEN_STRATEGIES)
molecule molecules kubelab-test: export ANSIBLE_STRATEGY = mitogen_linear
endif

.PHONY: help venv collection docker images package-mirror nvidia-builds kube-binaries kube-images lab-up lab-down demo bench kubelab-test lint yamllint ansible-lint ansible-lint-artifact docs-lint changelog-lint sanity units ansible-range molecule molecules test build artifact docs changelog ee-context clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

# Built once per requirements-dev.txt and Python under /var/cache/gpufleet/venv, .venv a link to it (tools/venv.sh).
$(BIN)/.installed: requirements-dev.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or later is needed"'
	tools/venv.sh $(PYTHON) $(VENV)
	touch $@

venv: $(BIN)/.installed  ## create the virtualenv from the pinned requirements-dev.txt

collection: $(COLLECTION_LINK)  ## make the checkout visible as gpufleet.node

$(COLLECTION_LINK):
	mkdir -p $(dir $@)
	ln -sfn ../../../.. $@

docker:  ## install and start the Docker daemon when it does not answer
	lab/labctl docker

images: docker  ## build or reuse the node base images (RELEASES="bookworm sid")
	lab/labctl images $(RELEASES)

package-mirror: venv images  ## build or reuse the signed local apt mirror of the packages the tests pin (lab/README.md)
	lab/labctl package-mirror

nvidia-builds: venv images  ## build or reuse NVIDIA's own code the lab runs (the mock NVML), from pinned sources (lab/README.md)
	lab/labctl nvidia-builds

kube-binaries: venv  ## build or reuse the Kubernetes binaries (cached under /var/cache/gpufleet)
	lab/labctl kube build-binaries

kube-images: venv images kube-binaries nvidia-builds  ## build or reuse the lab's node image and pod images (they need the binaries, and NVIDIA's config-manager)
	lab/labctl kube images

lab-up: venv collection images package-mirror kube-images  ## start the Kubernetes lab's control plane
	lab/labctl kube up

lab-down:  ## stop the Kubernetes lab and remove its nodes and state
	lab/labctl kube down

DEMO_NODES ?= gpu-h100-1:h100x8 gpu-a100-1:a100x4-mig:/data/kubelet
demo: venv collection images package-mirror kube-images  ## the main job: onboard two simulated GPU nodes into the lab
	lab/labctl kube up
	@for spec in $(DEMO_NODES); do \
	  IFS=: read -r name profile root <<< "$$spec"; \
	  lab/labctl kube node add "$$name" --gpu-profile "$$profile" $${root:+--kubelet-root-dir "$$root"}; \
	done
	$(BIN)/ansible-playbook -i .build/lab/inventory playbooks/onboard.yml -l gpu_new
	lab/labctl kube kubectl get nodes -L gpu-tier \
	  -o custom-columns='NODE:.metadata.name,STATUS:.status.conditions[-1].type,GPU:.status.allocatable.nvidia\.com/gpu,TIER:.metadata.labels.gpu-tier,DRIVER:.metadata.labels.gpufleet\.io/nvidia-driver,TAINTS:.spec.taints[*].key'
	@echo "Report: reports/onboard-summary.md. Tear the lab down with: make lab-down"

bench: venv collection images package-mirror kube-images  ## measure the collection on the lab (docs/benchmarks.md)
	lab/labctl bench

kubelab-test: venv collection images package-mirror kube-images  ## the Kubernetes lab end to end (pytest)
	$(BIN)/pytest -p no:cacheprovider lab/tests/e2e

yamllint: venv
	$(BIN)/yamllint --strict .

ansible-lint: venv collection
	$(BIN)/ansible-lint --profile production

# As a user installs it: outside the checkout (no .ansible-lint, no ignore file), its dependencies beside it.
ansible-lint-artifact: venv  ## ansible-lint (profile production) on the Galaxy artifact as installed
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(BIN)/python tools/artifact.py --dest "$$tmp" && \
	cd "$$tmp/collections/ansible_collections/gpufleet/node" && \
	ANSIBLE_COLLECTIONS_PATH="$$tmp/collections" $(CURDIR)/$(BIN)/ansible-lint --profile production --offline

docs-lint: venv collection  ## antsibull-docs lint-collection-docs; the generated role docs are up to date
	$(BIN)/antsibull-docs lint-collection-docs --plugin-docs $(COLLECTION_LINK)
	$(BIN)/python tools/role_docs.py --check

changelog-lint: venv  ## antsibull-changelog lint (changelogs/fragments/)
	$(BIN)/antsibull-changelog lint

lint: yamllint ansible-lint ansible-lint-artifact docs-lint changelog-lint  ## yamllint, ansible-lint (profile production; the checkout and the installed artifact), docs and changelog lint

sanity: venv  ## ansible-test sanity on the collection, no ignore files
	$(BIN)/python tests/sanity/run.py

units: venv collection  ## unit tests (pytest)
	$(BIN)/pytest tests/unit lab/tests

# The newest ansible-core of the supported range (meta/runtime.yml; its lowest is the virtualenv's), in a controller
# container of Debian trixie's Python 3.13 (tests/controllers/<name>.txt; lab/gpufleet_lab/controller.py): sanity,
# the unit tests and one scenario.
CONTROLLERS ?= newest
RANGE_SCENARIO ?= nvidia_driver_gpusim
ansible-range: export GPUFLEET_PROMTOOL = $(shell lab/labctl promtool)
ansible-range: venv collection images package-mirror  ## sanity, units and one scenario under the newest supported ansible-core (CONTROLLERS=newest)
	for controller in $(CONTROLLERS); do \
	  lab/labctl controller $$controller -- sh -ec 'ansible --version | head -1; python3 tests/sanity/run.py; \
	    pytest -p no:cacheprovider tests/unit; molecule test -s $(RANGE_SCENARIO)'; \
	done

# The onboard_fleet scenario runs the main job from the installed Galaxy artifact.
molecule: venv collection images package-mirror $(if $(filter onboard_fleet,$(SCENARIO)),artifact)  ## one scenario: make molecule SCENARIO=name
	$(BIN)/molecule test -s $(SCENARIO)

molecules: venv collection images package-mirror artifact  ## every molecule scenario
	$(BIN)/molecule test --all

test:  ## everything CI runs, stage by stage, stopping at the first failure; ends with each stage's wall time
	$(PYTHON) tests/run_stages.py

build: venv  ## build the Galaxy artifact
	$(BIN)/ansible-galaxy collection build --force

artifact: venv  ## build the Galaxy artifact and install it with its dependencies into .build/artifact/collections
	$(BIN)/python tools/artifact.py

ee-context: build  ## the execution environment's build context (context/), as ansible-builder create writes it
	$(BIN)/ansible-builder create -f execution-environment.yml -c context

docs: venv  ## generate docs/roles/<role>.md from every role's meta/argument_specs.yml
	$(BIN)/python tools/role_docs.py

changelog: venv  ## generate CHANGELOG.md from changelogs/ (a release: antsibull-changelog release --version X.Y.Z)
	$(BIN)/antsibull-changelog generate

clean:  ## remove the virtualenv and build tree (caches under /var/cache/gpufleet stay)
	rm -rf $(VENV) .build
