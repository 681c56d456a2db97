#!/usr/bin/env bash
# `make up`: bring up the local multi-node cluster with Shoal installed and
# run its main job (warming an image on every node). The parts it needs are
# not built yet; this says so instead of pretending.
set -euo pipefail
cd "$(dirname "$0")/.."

cat <<'MSG'
make up: not available yet.

What exists today:
  - the whole OpenKruise API as Go types (protocol/apis), generated clients
    (protocol/client) and CRDs (deploy/crds), validated by `make test`.

What `make up` needs and is not built yet:
  - test/cluster: the local multi-node Kubernetes (etcd, apiserver,
    scheduler, controller-manager, per-node containerd + kubelet);
  - shoal-coordinator and shoal-agent, and their manifests in deploy/;
  - ImagePullJob warm-up, the job `make up` runs.

Nothing was started.
MSG
exit 1
