// Package v1alpha1 holds the apps.kruise.io/v1alpha1 API: the workload,
// node-operation and distribution kinds of OpenKruise, as Shoal serves them.
// A manifest written for OpenKruise's v1alpha1 API decodes into these types
// unchanged.
//
// +k8s:deepcopy-gen=package
// +groupName=apps.kruise.io
package v1alpha1
