#!/usr/bin/env bash
# Regenerates everything derived from protocol/apis: deepcopy functions,
# the typed clientset, listers and informers (k8s.io/code-generator), and the
# CRD manifests in deploy/crds (controller-gen). Tool versions are pinned in
# hack/tools/go.mod. Last, the Helm chart's templates from deploy/ (hack/genchart).
# hack/verify.sh runs it in a scratch copy of the tree and compares.
set -euo pipefail

cd "$(dirname "$0")/.."

module=github.com/shoal-io/shoal
apis=(
  "$module/protocol/apis/apps/pub"
  "$module/protocol/apis/apps/v1alpha1"
  "$module/protocol/apis/apps/v1beta1"
  "$module/protocol/apis/policy/v1alpha1"
)
# Group versions that have kinds (pub only has shared types).
kinds=("${apis[@]:1}")
header=hack/boilerplate.go.txt
tool() { go tool -modfile=hack/tools/go.mod "$@"; }

echo "deepcopy-gen"
find protocol/apis -name zz_generated.deepcopy.go -delete
tool deepcopy-gen --output-file zz_generated.deepcopy.go --go-header-file "$header" "${apis[@]}"

client=protocol/client
rm -rf "$client"
inputs=()
for p in "${kinds[@]}"; do inputs+=(--input "$p"); done

echo "client-gen"
tool client-gen --go-header-file "$header" \
  --output-dir "$client/clientset" --output-pkg "$module/$client/clientset" \
  --clientset-name versioned --input-base "" "${inputs[@]}"

echo "lister-gen"
tool lister-gen --go-header-file "$header" \
  --output-dir "$client/listers" --output-pkg "$module/$client/listers" "${kinds[@]}"

echo "informer-gen"
tool informer-gen --go-header-file "$header" \
  --output-dir "$client/informers" --output-pkg "$module/$client/informers" \
  --versioned-clientset-package "$module/$client/clientset/versioned" \
  --listers-package "$module/$client/listers" "${kinds[@]}"

echo "controller-gen crd"
rm -rf deploy/crds
tool controller-gen crd:crdVersions=v1 paths=./protocol/apis/... output:crd:dir=deploy/crds

echo "conversion webhook stanza"
# The kinds whose v1alpha1 and v1beta1 differ convert through the
# coordinator's /convert endpoint (protocol/apis/apps/conversion; the list
# must equal conversion.Kinds(), which test/crdvalidation checks). caBundle
# is left out: the coordinator writes it, as for its admission webhooks.
converting=(advancedcronjobs broadcastjobs clonesets containerrecreaterequests daemonsets imagelistpulljobs
  imagepulljobs persistentpodstates resourcedistributions sidecarsets uniteddeployments workloadspreads)
for plural in "${converting[@]}"; do
  f=deploy/crds/apps.kruise.io_${plural}.yaml
  awk '{ print } /^spec:$/ && !done { print "  conversion:\n    strategy: Webhook\n    webhook:\n      clientConfig:\n        service:\n          name: shoal-webhook\n          namespace: shoal-system\n          path: /convert\n          port: 443\n      conversionReviewVersions:\n      - v1"; done = 1 }' "$f" > "$f.tmp"
  mv "$f.tmp" "$f"
done

echo "buf generate (protocol/nodework)"
# buf compiles the protos in Go (no protoc); the plugins come from the pinned
# tools module and are put on PATH for it.
toolbin=$(mktemp -d)
trap 'rm -rf "$toolbin"' EXIT
go build -modfile=hack/tools/go.mod -o "$toolbin/" \
  github.com/bufbuild/buf/cmd/buf \
  google.golang.org/protobuf/cmd/protoc-gen-go \
  google.golang.org/grpc/cmd/protoc-gen-go-grpc
rm -f protocol/nodework/v1/*.pb.go
(cd protocol/nodework && PATH="$toolbin:$PATH" buf lint && PATH="$toolbin:$PATH" buf generate)

echo "genchart (deploy/helm/shoal templates from deploy/)"
go run ./hack/genchart
