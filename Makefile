# Shoal's one build/test/verify loop: a new user and CI run the same targets.
# `make help` lists them.

include versions.env
export KUBE_VERSION ETCD_VERSION

SHELL := /usr/bin/env bash
CACHE := $(CURDIR)/.cache
# Build and module caches live under the ignored .cache dir so a CI run can
# keep them between runs; -modcacherw keeps `rm -rf .cache` working.
export GOCACHE ?= $(CACHE)/go-build
export GOMODCACHE ?= $(CACHE)/go-mod
export GOFLAGS := $(strip $(GOFLAGS) -modcacherw)
export PATH := $(PATH):/usr/local/go/bin

PLATFORMS ?= linux/amd64 linux/arm64 linux/arm/v7
BIN := $(CURDIR)/bin

.PHONY: help build test test-unit verify generate up clean

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## Compile everything for linux/amd64, arm64 and arm/v7 (CGO off); binaries of cmd/ land in bin/<os>-<arch>/.
	@set -e; for p in $(PLATFORMS); do \
	  os=$${p%%/*}; rest=$${p#*/}; arch=$${rest%%/*}; variant=$${rest#$$arch}; variant=$${variant#/}; \
	  echo "build $$p"; \
	  env CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$${variant#v} go build ./...; \
	  if [ -d cmd ]; then \
	    env CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$${variant#v} \
	      go build -trimpath -o $(BIN)/$$os-$$arch$${variant:+-$$variant}/ ./cmd/...; \
	  fi; \
	done

test: test-unit ## Run every test (the README's test command).

test-unit: ## Unit and in-process tests, with the race detector.
	go test -race -count=1 ./...

verify: ## gofmt, vet, staticcheck, generated code up to date, go mod tidy, one Kubernetes version.
	hack/verify.sh

generate: ## Regenerate deepcopy, clientset, listers, informers and CRDs from protocol/apis.
	hack/update-codegen.sh

up: ## Bring up the local cluster with Shoal installed and run its main job.
	hack/up.sh

clean: ## Remove build outputs and caches.
	rm -rf $(BIN) $(CACHE)
