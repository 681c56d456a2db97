// Package v1beta1 holds the apps.kruise.io/v1beta1 API. Shoal serves the
// Advanced StatefulSet at this version (the stored version) and at
// v1alpha1 with the same schema, so no conversion webhook is needed.
//
// +k8s:deepcopy-gen=package
// +groupName=apps.kruise.io
package v1beta1
