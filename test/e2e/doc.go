// Package e2e is Shoal's end-to-end suite. Its tests carry the build tag
// e2e and run against the cluster that KUBECONFIG names, pulling test images
// from SHOAL_REGISTRY:
//
//	eval "$(make -s cluster-env)" && go test -tags e2e -v ./test/e2e/
//
// Without the tag, or without the variables, nothing runs. See README.md.
package e2e
