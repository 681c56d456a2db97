# Shoal's one build/test/verify loop: a new user and CI run the same targets.
# `make help` lists them.

include versions.env
export KUBE_VERSION ETCD_VERSION

SHELL := /usr/bin/env bash
CACHE := $(CURDIR)/.cache
# Go's own build and module caches (or the user's GOCACHE/GOMODCACHE) and
# the machine-level Shoal cache (test/cluster.MachineCacheDir: the
# Kubernetes and etcd binaries) outlive the checkout, so a fresh clone on a
# warm machine rebuilds nothing. .cache/ in the checkout holds only this
# checkout's cluster state, logs and test results.
#
# One set of compile flags for every go command (vet, staticcheck, build,
# the images): the same package is then compiled once per platform, not
# once per command. -race (unit tests) is the only other configuration.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath -buildvcs=false)
export PATH := $(PATH):/usr/local/go/bin
SHOAL_CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/shoal
export SHOAL_CACHE_DIR
STAGE := hack/stage.sh

PLATFORMS ?= linux/amd64 linux/arm64 linux/arm/v7
BIN := $(CURDIR)/bin
NODES ?= 3
SHOAL_CLUSTER := $(CACHE)/bin/shoal-cluster

SHOAL_REGISTRY ?= 172.31.250.1:5000
IMAGE_TAG ?= dev

# The version stamped into the binaries (main.version) and naming the
# plugin's release archives: git describe, as hack/build-images stamps the
# images; a release sets it to its tag (make build VERSION=v0.1.0).
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
endif
# Where the krew manifest says the archives are downloaded from: the GitHub
# release of VERSION. To try an archive before it is uploaded:
#   kubectl krew install --manifest=bin/krew/kruise.yaml --archive=bin/krew/kubectl-kruise_<VERSION>_linux_amd64.tar.gz
KREW_URI_BASE ?= https://github.com/shoal-io/shoal/releases/download/$(VERSION)
# Packed next to kubectl-kruise in each archive: the license, or the README
# while the repository has no LICENSE file.
KREW_FILES ?= $(firstword $(wildcard LICENSE LICENSE.md LICENSE.txt) README.md)

.PHONY: help build binaries plugin-archives test test-unit test-e2e e2e e2e-kind verify generate up clean clean-cache \
	cluster-up cluster-down cluster-env images deploy soak bench-nodework bench-imagepull bench-probes bench-p2p bench-agent bench-crr bench-rollout bench-daemonset bench-distribution bench-pub bench-probecost $(SHOAL_CLUSTER)

help: ## List the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

build: binaries plugin-archives ## Compile everything for linux/amd64, arm64 and arm/v7 (CGO off): binaries of cmd/ in bin/<os>-<arch>/, the plugin's krew archives and manifest in bin/krew/.

binaries: ## Compile everything for every platform (CGO off); binaries of cmd/ land in bin/<os>-<arch>/, stamped with VERSION.
	@set -e; for p in $(PLATFORMS); do \
	  os=$${p%%/*}; rest=$${p#*/}; arch=$${rest%%/*}; variant=$${rest#$$arch}; variant=$${variant#/}; \
	  $(STAGE) "build $$p" env CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$${variant#v} \
	    bash -c 'go build ./... && go build -ldflags="-s -w -X main.version=$$2" -o "$$1" ./cmd/...' - \
	    $(BIN)/$$os-$$arch$${variant:+-$$variant}/ '$(VERSION)'; \
	done

plugin-archives: binaries ## The kubectl-kruise release archives, one per platform, and their krew manifest bin/krew/kruise.yaml (URIs under KREW_URI_BASE).
	$(STAGE) "plugin archives" go run ./hack/krew --version '$(VERSION)' --uri-base '$(KREW_URI_BASE)' \
	  --platforms "$(PLATFORMS)" --bin-dir $(BIN) --out $(BIN)/krew $(addprefix --file ,$(KREW_FILES))

test: test-unit test-e2e ## Run every test (the README's test command).

test-unit: $(SHOAL_CLUSTER) ## Unit and in-process tests, with the race detector (results in .cache/test-results/).
	@# Some run a real containerd or build the test images: the cluster's Debian packages first.
	$(SHOAL_CLUSTER) packages
	$(STAGE) unit hack/gotest.sh unit -race -count=1 ./...
	$(STAGE) "unit (bench tag)" hack/gotest.sh unit-bench -race -count=1 -tags bench -skip 'Benchmark$$' ./test/bench/p2p/
	$(STAGE) fuzz hack/fuzz.sh

test-e2e: $(SHOAL_CLUSTER) ## End-to-end suite on a fresh local cluster, torn down afterwards and checked.
	hack/e2e.sh fresh

e2e: $(SHOAL_CLUSTER) ## End-to-end suite against the running local cluster (starts it if needed).
	hack/e2e.sh

soak: $(SHOAL_CLUSTER) ## Fault soak on the local cluster (starts it if needed): SOAK_MINUTES (20) of work under a seeded fault schedule, invariants checked; SOAK_SEED, SOAK_FAULTS, SOAK_DEFECT.
	hack/soak.sh

e2e-kind: ## End-to-end suite on kind (needs Docker and internet; see test/e2e/README.md).
	hack/e2e-kind.sh

$(SHOAL_CLUSTER):
	@go build -o $@ ./cmd/shoal-cluster

cluster-up: $(SHOAL_CLUSTER) ## Start the local multi-node cluster (NODES=3).
	$(SHOAL_CLUSTER) up --nodes $(NODES)

cluster-down: $(SHOAL_CLUSTER) ## Stop the local cluster and remove everything it made.
	$(SHOAL_CLUSTER) down

cluster-env: $(SHOAL_CLUSTER) ## Print export lines for the local cluster: eval "$$(make -s cluster-env)".
	@$(SHOAL_CLUSTER) env

verify: ## gofmt, vet, staticcheck, generated code up to date, go mod tidy, one Kubernetes version.
	$(STAGE) verify hack/verify.sh

generate: ## Regenerate deepcopy, clientset, listers, informers and CRDs from protocol/apis, and the Helm chart's templates from deploy/.
	hack/update-codegen.sh

images: ## Build Shoal's images without Docker for every platform and push them to the registry (refs in .cache/images.txt).
	go run ./hack/build-images --registry $(SHOAL_REGISTRY) --tag $(IMAGE_TAG) --platforms "$(PLATFORMS)" --push --out $(CACHE)/images.txt

deploy: ## Build and push the images, install deploy/ into the cluster of KUBECONFIG (default: the local one) and wait until Shoal runs.
	SHOAL_REGISTRY=$(SHOAL_REGISTRY) SHOAL_TAG=$(IMAGE_TAG) SHOAL_PLATFORMS="$(PLATFORMS)" hack/deploy.sh

bench-nodework: ## Node-work benchmark: 1,000 simulated agents against one coordinator over real gRPC.
	hack/bench-nodework.sh

bench-imagepull: ## ImagePullJob benchmark: one job over 1,000 simulated agents; dispatch, completion, API writes, coordinator CPU and memory.
	SHOAL_BENCH=imagepull hack/bench-nodework.sh

bench-probes: ## PodProbeMarker benchmark: 10,000 pods on 1,000 simulated agents against a real apiserver; steady-state pod writes, flip latency, coordinator CPU and RSS.
	SHOAL_BENCH=probes hack/bench-nodework.sh

bench-p2p: ## Image swarm benchmark: 16 agent processes warm a 256 MiB image; swarm (plain and over peer TLS) vs spegel-like vs naive, 4 scenarios (about 40 minutes).
	hack/bench-p2p.sh

bench-crr: ## ContainerRecreateRequest latency (p50/p95 and stages) on the running local cluster.
	hack/bench-crr.sh

bench-rollout: ## Image rollout of 30 pods: Deployment vs CloneSet ReCreate vs in-place with pre-download, on the running local cluster.
	hack/bench-rollout.sh

bench-daemonset: ## Advanced DaemonSet update on every node: Standard vs in-place with pre-download; unready time per node and registry bytes.
	hack/bench-daemonset.sh

bench-pub: ## Pod DELETE admission latency through the PodUnavailableBudget webhook at 50/s, with and without it in one run.
	hack/bench-pub.sh

bench-distribution: ## ResourceDistribution of a Secret to 500 namespaces and one change: time against client writers, API writes per namespace.
	hack/bench-distribution.sh

bench-probecost: ## Agent CPU per PodProbeMarker probe (tcp, http, exec) against a private containerd's real containers; exec against bare runc exec.
	hack/bench-probecost.sh

bench-agent: ## Idle RSS and CPU of the agents on the running local cluster (60 s window).
	hack/agent-footprint.sh

up: $(SHOAL_CLUSTER) ## Bring up the local cluster with Shoal installed and run its main job.
	hack/up.sh

clean: ## Remove what this checkout built: bin/ and .cache/ (cluster state, logs, test results).
	rm -rf $(BIN) $(CACHE)

clean-cache: ## Remove the machine-level caches a run fills: Shoal's (Kubernetes, etcd), Go's build and module caches, staticcheck's.
	rm -rf "$(SHOAL_CACHE_DIR)"
	go clean -cache -modcache
	rm -rf "$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/staticcheck"
