// Package conversion converts apps.kruise.io objects between v1alpha1 and
// v1beta1, for the coordinator's CRD conversion webhook (Convert) and for
// code that reads one version of a kind and is handed the other.
//
// Every conversion is lossless in both directions: converting an object to
// the other version and back gives the object it started from. A field of
// one version with no place in the other travels in an annotation of the
// converted object, conversion.shoal.io/<version>, holding those fields as
// JSON (see Stash and Unstash), and is restored from it on the way back, as
// Kubernetes does for its own API versions. Fields that both versions have,
// under other names or shapes, are mapped, never stashed. The fuzz tests of
// this package check the round trip both ways for random objects of every
// kind.
//
// Each kind has one file: its two conversion functions and their
// registration (register), which Convert looks up by kind.
package conversion
