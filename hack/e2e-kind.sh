#!/usr/bin/env bash
# Runs the end-to-end suite on a kind cluster (1 control plane + 3 workers,
# test/e2e/kind-config.yaml). Needs Docker, kind and internet access; the
# local cluster (make e2e) needs neither. See test/e2e/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "e2e-kind needs $tool on PATH" >&2; exit 1; }
done
: "${SHOAL_REGISTRY:?set SHOAL_REGISTRY to a registry the kind nodes can pull from, holding pause:3.10, busybox:latest and testserver:latest (see test/e2e/README.md)}"
name=shoal-e2e
kind get clusters | grep -qx "$name" || kind create cluster --name "$name" --config test/e2e/kind-config.yaml
export KUBECONFIG=$PWD/.cache/kind-kubeconfig
kind get kubeconfig --name "$name" > "$KUBECONFIG"
hack/install-crds.sh
go test -tags e2e -count=1 -timeout 30m -v ./test/e2e/...
