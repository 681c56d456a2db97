// Package pub holds API types shared by several kinds of the apps.kruise.io
// group and by both of its versions: pod lifecycle hooks, in-place update
// strategy, update ordering and scattering.
//
// +k8s:deepcopy-gen=package
package pub
