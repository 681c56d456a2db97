#!/usr/bin/env bash
# `make deploy`: build Shoal's images (hack/build-images, no Docker), push
# them to the registry the cluster's nodes pull from, install deploy/ with
# the images pinned by digest, and wait until the coordinator Deployment and
# the agent DaemonSet are rolled out on every node.
#
# Environment:
#   SHOAL_REGISTRY         registry host:port (default 172.31.250.1:5000, the
#                          local cluster's registry, the same address in the
#                          root namespace, in every node and in pods)
#   SHOAL_TAG              tag of the pushed image indexes (default dev)
#   SHOAL_PLATFORMS        platforms to build, separated by spaces or commas
#                          (default linux/amd64 linux/arm64 linux/arm/v7)
#   SHOAL_DEPLOY_TIMEOUT   seconds to wait for the rollout (default 180)
#   SHOAL_MIRROR_REGISTRIES  the agents' --mirror-registries (default _default plus
#                          the plain-HTTP test registries 172.31.250.1:5001-5006,
#                          test/cluster's TestRegistries)
#   SHOAL_BUILD_FLAGS      more flags for hack/build-images (e.g. --src DIR)
#   KUBECONFIG             default .cache/cluster/kubeconfig
#   KUBECTL                default .cache/bin/kubectl, else kubectl on PATH
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

export PATH=$PATH:/usr/local/go/bin

registry=${SHOAL_REGISTRY:-172.31.250.1:5000}
tag=${SHOAL_TAG:-dev}
platforms=${SHOAL_PLATFORMS:-linux/amd64 linux/arm64 linux/arm/v7}
timeout=${SHOAL_DEPLOY_TIMEOUT:-180}
export KUBECONFIG=${KUBECONFIG:-$root/.cache/cluster/kubeconfig}
kubectl=${KUBECTL:-$root/.cache/bin/kubectl}
[ -x "$kubectl" ] || kubectl=kubectl
ns=shoal-system
images=.cache/images.txt
overlay=.cache/deploy

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { echo "deploy: $*" >&2; exit 1; }

command -v "$kubectl" >/dev/null || die "no kubectl at .cache/bin/kubectl nor on PATH (make cluster-up installs one)"
first=${KUBECONFIG%%:*}
[ -f "$first" ] || die "no kubeconfig at $first: start the local cluster (make cluster-up) or set KUBECONFIG"
"$kubectl" version --request-timeout=10s >/dev/null 2>&1 ||
  die "the cluster of $KUBECONFIG does not answer: start it (make cluster-up) or set KUBECONFIG"

mirrors=${SHOAL_MIRROR_REGISTRIES:-}
if [ -z "$mirrors" ]; then
  mirrors=_default
  for port in 5001 5002 5003 5004 5005 5006; do # test/cluster's TestRegistries
    mirrors="$mirrors,172.31.250.1:$port=http://172.31.250.1:$port"
  done
fi

log "build and push images to $registry (tag $tag; $platforms)"
# shellcheck disable=SC2086 # SHOAL_BUILD_FLAGS is a list of flags
go run ./hack/build-images --registry "$registry" --tag "$tag" --platforms "$platforms" \
  --push --out "$images" ${SHOAL_BUILD_FLAGS:-}

# The overlay pins the base's image names to the pushed indexes by digest,
# so a rebuilt image always rolls out and nodes never run a stale tag.
mkdir -p "$overlay"
{
  echo "# Written by hack/deploy.sh from $images; do not edit."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "- ../../deploy"
  echo "images:"
  n=0
  while read -r program ref; do
    case $program in shoal-agent | shoal-coordinator) ;; *) continue ;; esac
    digest=${ref##*@}
    repo=${ref%@*}
    repo=${repo%:*} # drop the tag; the registry's :port stays
    echo "- name: $program"
    echo "  newName: $repo"
    echo "  digest: $digest"
    n=$((n + 1))
  done <"$images"
  [ "$n" = 2 ] || die "$images names $n of shoal-agent and shoal-coordinator, want both"
  echo "patches:"
  # The local cluster's test registries (plain HTTP, served by the e2e
  # tests and make up) are mirrored through the agents too.
  echo "- target: {kind: DaemonSet, name: shoal-agent}"
  echo "  patch: |-"
  echo "    - op: add"
  echo "      path: /spec/template/spec/containers/0/args"
  echo "      value: [\"--mirror-registries=$mirrors\"]"
  if [ "${SHOAL_TEST_WORK:-}" = 1 ]; then
    # e2e only: the coordinator turns labelled ConfigMaps into noop work,
    # and runs with the OpenKruise gates OpenKruise's own e2e cases need.
    echo "- target: {kind: Deployment, name: shoal-coordinator}"
    echo "  patch: |-"
    echo "    - op: add"
    echo "      path: /spec/template/spec/containers/0/args"
    echo '      value: ["--enable-test-work", "--feature-gates=PreparingUpdateAsUpdate=true,StatefulSetAutoResizePVCGate=true"]'
  fi
} >"$overlay/kustomization.yaml.tmp"
mv "$overlay/kustomization.yaml.tmp" "$overlay/kustomization.yaml"

log "apply deploy/ (overlay $overlay)"
"$kubectl" apply --server-side --force-conflicts -k "$overlay"

# Bounded wait: one deadline for both rollouts.
deadline=$(($(date +%s) + timeout))
remaining() {
  local left=$((deadline - $(date +%s)))
  [ "$left" -gt 0 ] || left=1
  echo "${left}s"
}

diagnose() {
  echo "deploy: Shoal not rolled out within ${timeout}s" >&2
  "$kubectl" -n "$ns" get deployment,daemonset,pods -o wide >&2 || true
  local pod
  "$kubectl" -n "$ns" get pods -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
    awk '$2 != "True" {print $1}' | while read -r pod; do
      echo "----- describe pod $pod" >&2
      "$kubectl" -n "$ns" describe pod "$pod" >&2 || true
      echo "----- logs of $pod (last 30 lines)" >&2
      "$kubectl" -n "$ns" logs "$pod" --all-containers --tail=30 >&2 || true
    done
  exit 1
}

log "wait for deployment/shoal-coordinator (up to ${timeout}s)"
"$kubectl" -n "$ns" rollout status deployment/shoal-coordinator --timeout="$(remaining)" || diagnose
log "wait for daemonset/shoal-agent on every node"
"$kubectl" -n "$ns" rollout status daemonset/shoal-agent --timeout="$(remaining)" || diagnose

"$kubectl" -n "$ns" get pods -o wide
log "Shoal is deployed: $(sed -n 's/^\(shoal-[a-z]*\) .*@\(sha256:.\{12\}\).*/\1@\2/p' "$images" | tr '\n' ' ')"
