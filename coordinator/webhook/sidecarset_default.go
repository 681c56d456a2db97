package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// SidecarSetMutatePath serves the SidecarSet defaulting webhook.
const SidecarSetMutatePath = "/mutate-sidecarset"

// DefaultSidecarSet handles CREATE and UPDATE of a SidecarSet (at
// v1beta1): it defaults each sidecar as OpenKruise's webhook does. That is
// its podInjectPolicy (BeforeAppContainer for containers, AfterAppContainer
// for init containers; the CRD schema cannot default it, both lists share
// one type), and the fields the apiserver would default in a pod's
// container (container.go's defaultContainer). The CRD schema defaults
// every other field.
//
// The container defaults matter beyond tidiness: a SidecarSet's hash
// (kruise.io/sidecarset-hash on the pods it injected) covers its stored
// containers. OpenKruise hashes them defaulted, so the same manifest must
// be stored the same way here, or every pod injected under OpenKruise would
// look out of date to Shoal once the SidecarSet is applied again.
func DefaultSidecarSet(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) || req.SubResource != "" || len(req.Object.Raw) == 0 {
		return allowed
	}
	set := &v1beta1.SidecarSet{}
	if err := json.Unmarshal(req.Object.Raw, set); err != nil {
		return allowed // the apiserver's own decoding answers for it
	}
	var ops []jsonPatchOp
	for _, list := range []struct {
		path       string
		containers []v1beta1.SidecarContainer
		policy     v1beta1.PodInjectPolicyType
	}{
		{"/spec/containers", set.Spec.Containers, v1beta1.BeforeAppContainerType},
		{"/spec/initContainers", set.Spec.InitContainers, v1beta1.AfterAppContainerType},
	} {
		for i := range list.containers {
			c := &list.containers[i]
			if c.PodInjectPolicy == "" {
				ops = append(ops, jsonPatchOp{Op: "add", Path: fmt.Sprintf("%s/%d/podInjectPolicy", list.path, i), Value: list.policy})
			}
			before := c.DeepCopy()
			defaultContainer(&c.Container)
			for j := range c.TransferEnv {
				if from := c.TransferEnv[j].SourceContainerNameFrom; from != nil {
					defaultFieldRef(from.FieldRef)
				}
			}
			changed, err := changedFields(before, c)
			if err != nil {
				return allowed
			}
			for _, f := range changed {
				ops = append(ops, jsonPatchOp{Op: "add", Path: fmt.Sprintf("%s/%d/%s", list.path, i, f.name), Value: f.value})
			}
		}
	}
	if len(ops) == 0 {
		return allowed
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return allowed
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
}

// changedField is a top-level JSON member of a sidecar that defaulting set
// or changed.
type changedField struct {
	name  string
	value json.RawMessage
}

// changedFields lists the top-level JSON members of after (a defaulted
// copy of before) that differ from before's, in name order. Defaulting
// only adds, so each becomes an "add" of the whole member (which replaces
// one that exists): the sidecar's other members stay as stored, unknown
// fields included.
func changedFields(before, after *v1beta1.SidecarContainer) ([]changedField, error) {
	var b, a map[string]json.RawMessage
	for _, x := range []struct {
		c   *v1beta1.SidecarContainer
		dst *map[string]json.RawMessage
	}{{before, &b}, {after, &a}} {
		raw, err := json.Marshal(x.c)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, x.dst); err != nil {
			return nil, err
		}
	}
	var out []changedField
	for _, name := range slices.Sorted(maps.Keys(a)) {
		if !bytes.Equal(a[name], b[name]) {
			out = append(out, changedField{name: name, value: a[name]})
		}
	}
	return out, nil
}
