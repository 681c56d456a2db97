#!/usr/bin/env bash
# Installs Shoal's CRDs (deploy/crds) into the cluster $KUBECONFIG points at
# and waits until they are served. Server-side apply: the CRDs are larger
# than client-side apply's annotation limit.
set -euo pipefail
cd "$(dirname "$0")/.."
kubectl=${KUBECTL:-kubectl}
command -v "$kubectl" >/dev/null || kubectl=.cache/bin/kubectl
"$kubectl" apply --server-side --force-conflicts -f deploy/crds/ >/dev/null
"$kubectl" wait --for=condition=Established --timeout=60s -f deploy/crds/ >/dev/null
echo "CRDs installed: $(ls deploy/crds | wc -l)"
