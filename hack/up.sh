#!/usr/bin/env bash
# `make up`: bring up the local multi-node cluster, install Shoal's CRDs and
# run a smoke workload. Shoal's own components (agent, coordinator) are not
# built yet; this says so instead of pretending.
set -euo pipefail
cd "$(dirname "$0")/.."
sc=.cache/bin/shoal-cluster

"$sc" up --nodes "${NODES:-3}"
eval "$("$sc" env)"
hack/install-crds.sh

echo "smoke workload: 3 replicas of $SHOAL_REGISTRY/testserver spread over the nodes"
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: smoke, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: smoke}}
  template:
    metadata: {labels: {app: smoke}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: smoke}}}
      containers:
      - name: web
        image: $SHOAL_REGISTRY/testserver:latest
        args: [serve, --port, "8080"]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}}
YAML
kubectl rollout status deployment/smoke --timeout=120s
kubectl get nodes -L topology.kubernetes.io/zone
kubectl get pods -l app=smoke -o wide

cat <<MSG

The cluster is up. Use it from a shell with:
  eval "\$(make -s cluster-env)"

Not there yet (later issues): shoal-coordinator and shoal-agent and their
manifests in deploy/, so no Shoal kind does anything yet beyond schema
validation; the ImagePullJob warm-up demo \`make up\` will run.
Stop everything with: make cluster-down
MSG
