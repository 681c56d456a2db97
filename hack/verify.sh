#!/usr/bin/env bash
# Everything `make verify` checks: formatting, vet, lint, generated code up to
# date, go.mod tidy, and one Kubernetes version across versions.env and
# go.mod. Prints every failure, exits non-zero if any.
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
step() { echo "--- $*"; }
bad() { echo "FAIL: $*" >&2; fail=1; }

step gofmt
out=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))
[ -z "$out" ] || bad "gofmt would change: $out (run: gofmt -w <files>)"

step "go vet"
go vet ./... || bad "go vet"

step staticcheck
go tool -modfile=hack/tools/go.mod staticcheck ./... || bad "staticcheck"

step "go mod tidy"
for mod in . hack/tools; do
  tmp=$(mktemp -d)
  cp "$mod/go.mod" "$mod/go.sum" "$tmp/"
  (cd "$mod" && go mod tidy) || bad "go mod tidy in $mod"
  if ! diff -q "$tmp/go.mod" "$mod/go.mod" >/dev/null || ! diff -q "$tmp/go.sum" "$mod/go.sum" >/dev/null; then
    bad "go mod tidy changes $mod/go.mod or go.sum (run: cd $mod && go mod tidy)"
    cp "$tmp/go.mod" "$tmp/go.sum" "$mod/"
  fi
  rm -rf "$tmp"
done

step "kubernetes version"
. ./versions.env
want="v0.${KUBE_VERSION#1.}"
for m in k8s.io/api k8s.io/apimachinery k8s.io/client-go k8s.io/apiextensions-apiserver; do
  have=$(go list -m -f '{{.Version}}' "$m" 2>/dev/null || true)
  [ -z "$have" ] || [ "$have" = "$want" ] || bad "$m is $have in go.mod, versions.env says $want (KUBE_VERSION=$KUBE_VERSION)"
done
have=$(cd hack/tools && go list -m -f '{{.Version}}' k8s.io/code-generator)
[ "$have" = "$want" ] || bad "k8s.io/code-generator is $have in hack/tools/go.mod, want $want"

step "generated code"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tar --exclude=.git --exclude=.cache -cf - . | tar -C "$scratch" -xf -
if (cd "$scratch" && hack/update-codegen.sh >/dev/null); then
  for d in protocol deploy/crds; do
    diff -r "$d" "$scratch/$d" >/dev/null || {
      diff -r "$d" "$scratch/$d" | head -20 >&2
      bad "generated code in $d is stale (run: make generate)"
    }
  done
else
  bad "hack/update-codegen.sh failed"
fi

[ $fail = 0 ] && echo "verify: ok"
exit $fail
