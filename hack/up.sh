#!/usr/bin/env bash
# `make up`: bring up the local multi-node cluster, build Shoal's images,
# deploy Shoal from deploy/ (coordinator + one agent per node), run a smoke
# workload and show that every agent is connected and in the mesh.
set -euo pipefail
cd "$(dirname "$0")/.."
sc=.cache/bin/shoal-cluster

"$sc" up --nodes "${NODES:-3}"
eval "$("$sc" env)"
SHOAL_PLATFORMS=${SHOAL_PLATFORMS:-linux/$(go env GOARCH)} hack/deploy.sh

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
kubectl -n shoal-system get pods -o wide

# Shoal's main job: warm an image on every node with an ImagePullJob, and
# show each node's pull as the coordinator sees it.
go build -o .cache/bin/kubectl-kruise ./cmd/kubectl-kruise
kruise=.cache/bin/kubectl-kruise
kubectl delete imagepulljob warm-busybox --ignore-not-found >/dev/null
echo "warming $SHOAL_REGISTRY/busybox:latest on every node (ImagePullJob warm-busybox, imagePullPolicy Always)"
"$kruise" create imagepulljob warm-busybox --image "$SHOAL_REGISTRY/busybox:latest" \
  --image-pull-policy Always --parallelism 2 --wait --wait-timeout 3m
kubectl get imagepulljob warm-busybox
"$kruise" get imagepulljob warm-busybox --nodes

# Read Shoal's own metrics through the apiserver's pod proxy.
metric() { kubectl get --raw "/api/v1/namespaces/shoal-system/pods/$1/proxy/metrics" | grep "^$2" || true; }
leader=$(kubectl -n shoal-system get lease shoal-coordinator -o jsonpath='{.spec.holderIdentity}')
for _ in $(seq 1 30); do
  m=$(metric "$leader:8080" shoal_coordinator_connected_agents)
  [ "${m##* }" = "${NODES:-3}" ] && break
  sleep 1
done
echo "coordinator leader $leader: $m"
for pod in $(kubectl -n shoal-system get pods -l app.kubernetes.io/name=shoal-agent -o name); do
  echo "${pod#pod/}: $(metric "${pod#pod/}:9480" 'shoal_agent_mesh_members{state="alive"}')"
done

cat <<MSG

The cluster is up with Shoal running. Use it from a shell with:
  eval "\$(make -s cluster-env)"

Agents serve /metrics on <node IP>:9480, and /inventory and /mesh there
to a bearer token allowed to read them (ClusterRole
shoal-agent-endpoints-reader; docs/dev/backbone.md#agent-endpoints); the
coordinator serves /metrics on <pod IP>:8080. The kubectl plugin is
.cache/bin/kubectl-kruise (try: get imagepulljob warm-busybox --nodes).
Stop everything with: make cluster-down
MSG
