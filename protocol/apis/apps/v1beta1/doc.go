// Package v1beta1 holds the apps.kruise.io/v1beta1 API, the shape of
// OpenKruise's current release. The Advanced StatefulSet has one schema at
// both versions; every other kind converts to and from v1alpha1 through
// the coordinator's conversion webhook (protocol/apis/apps/conversion).
// docs/dev/api-versions.md says which version each kind is stored at.
//
// +k8s:deepcopy-gen=package
// +groupName=apps.kruise.io
package v1beta1
