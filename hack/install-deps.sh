#!/usr/bin/env bash
# Installs what `make test` and `make verify` need on a fresh Debian machine:
# a C compiler (the race detector needs cgo), Go >= the version in go.mod,
# and the local cluster's Debian packages.
# Go tools (code generators, linters) are pinned in hack/tools/go.mod and
# fetched by `go tool` from the module proxy on first use.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"

apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

command -v gcc >/dev/null || apt_install gcc libc6-dev
command -v git >/dev/null || apt_install git
command -v make >/dev/null || apt_install make

if ! command -v go >/dev/null; then
  echo "install-deps: Go is not installed. Install Go 1.26 or newer (https://go.dev/dl) into /usr/local/go." >&2
  exit 1
fi
# A Go >= 1.21 fetches the toolchain go.mod asks for from the module proxy
# (GOTOOLCHAIN=auto), so an older local Go is fine.
go version

# The local cluster's Debian packages (containerd, runc, CNI plugins,
# busybox-static, ...): the unit tests that run a real containerd or build
# the test images need them too, and they run before the cluster is up.
cd "$(dirname "$0")/.."
go run ./cmd/shoal-cluster packages
