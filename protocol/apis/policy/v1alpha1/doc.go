// Package v1alpha1 holds the policy.kruise.io/v1alpha1 API:
// PodUnavailableBudget, which limits how many pods of an application may be
// unavailable at once through voluntary disruption.
//
// +k8s:deepcopy-gen=package
// +groupName=policy.kruise.io
package v1alpha1
