// Package inplace is the in-place update engine the workload controllers
// share: what changes between two revisions of a pod template and whether
// that can happen in place (Calculate), which containers change now and
// which wait for a later batch by container launch priority (Split), the
// pod's apps.kruise.io/inplace-update-state annotation (NewState,
// ReadState), applying a batch to a pod (Apply) and telling when it is
// done (ImagesUpdated).
//
// In place means without deleting the pod: a container's image can change
// (the kubelet restarts that container) and so can the pod's labels and
// annotations. A label or annotation that a container's env reads through
// the Downward API (valueFrom.fieldRef metadata.labels['k'] or
// metadata.annotations['k']) changes that container's env, which only a
// restart applies: those containers are listed in Spec.EnvFromMetadata for
// the node agent to recreate. Any other change is not in place.
package inplace

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Spec is what an in-place update changes in a pod.
type Spec struct {
	// Revision is the revision the pod moves to.
	Revision string `json:"revision"`
	// Images are the new images, by container name.
	Images map[string]string `json:"containerImages,omitempty"`
	// Labels are the template's label changes: a value to set, or nil to
	// remove the key.
	Labels map[string]*string `json:"labels,omitempty"`
	// Annotations are the template's annotation changes, the same way.
	Annotations map[string]*string `json:"annotations,omitempty"`
	// EnvFromMetadata are the containers whose env reads a changed label
	// or annotation, each with the keys it reads that change.
	EnvFromMetadata map[string]MetadataRefs `json:"containerRefMetadata,omitempty"`
}

// MetadataRefs are the label and annotation keys a container's env reads.
type MetadataRefs struct {
	// Labels are the label keys.
	Labels []string `json:"labels,omitempty"`
	// Annotations are the annotation keys.
	Annotations []string `json:"annotations,omitempty"`
}

// Empty reports whether s changes nothing.
func (s *Spec) Empty() bool {
	return len(s.Images) == 0 && len(s.Labels) == 0 && len(s.Annotations) == 0
}

// NotInPlaceError says why two revisions cannot be moved between in place.
type NotInPlaceError struct {
	// Field is the first field that differs, as a path such as
	// "spec.containers[web].resources".
	Field string
}

// Error implements error.
func (e *NotInPlaceError) Error() string {
	return fmt.Sprintf("%s changed: only container images and pod labels and annotations change in place", e.Field)
}

// Calculate returns the in-place update that moves a pod from the template
// of one revision (from) to that of another (to, named revision), or a
// *NotInPlaceError naming the first change that needs a new pod.
func Calculate(from, to *corev1.PodTemplateSpec, revision string) (*Spec, error) {
	s := &Spec{Revision: revision}
	if len(from.Spec.Containers) != len(to.Spec.Containers) {
		return nil, &NotInPlaceError{Field: "spec.containers (added or removed)"}
	}
	// The new spec with the old images must be the old spec.
	probe := to.Spec.DeepCopy()
	for i := range probe.Containers {
		old, c := &from.Spec.Containers[i], &probe.Containers[i]
		if old.Name != c.Name {
			return nil, &NotInPlaceError{Field: fmt.Sprintf("spec.containers[%d].name", i)}
		}
		if c.Image != old.Image {
			if s.Images == nil {
				s.Images = map[string]string{}
			}
			s.Images[c.Name] = c.Image
			c.Image = old.Image
		}
	}
	if !apiequality.Semantic.DeepEqual(&from.Spec, probe) {
		return nil, &NotInPlaceError{Field: firstDifference(&from.Spec, probe)}
	}
	s.Labels = mapChanges(from.Labels, to.Labels)
	s.Annotations = mapChanges(from.Annotations, to.Annotations)
	for i := range to.Spec.Containers {
		c := &to.Spec.Containers[i]
		refs := envMetadataRefs(c)
		var hit MetadataRefs
		for _, k := range refs.Labels {
			if _, ok := s.Labels[k]; ok {
				hit.Labels = append(hit.Labels, k)
			}
		}
		for _, k := range refs.Annotations {
			if _, ok := s.Annotations[k]; ok {
				hit.Annotations = append(hit.Annotations, k)
			}
		}
		if len(hit.Labels)+len(hit.Annotations) > 0 {
			if s.EnvFromMetadata == nil {
				s.EnvFromMetadata = map[string]MetadataRefs{}
			}
			s.EnvFromMetadata[c.Name] = hit
		}
	}
	return s, nil
}

// mapChanges returns the keys whose value differs from a to b: b's value,
// or nil where b lacks the key.
func mapChanges(a, b map[string]string) map[string]*string {
	var out map[string]*string
	set := func(k string, v *string) {
		if out == nil {
			out = map[string]*string{}
		}
		out[k] = v
	}
	for k, v := range b {
		if old, ok := a[k]; !ok || old != v {
			set(k, &v)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			set(k, nil)
		}
	}
	return out
}

// fieldRefPath matches the Downward API paths of one label or annotation.
var fieldRefPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// envMetadataRefs lists the label and annotation keys c's env reads
// through fieldRef, sorted.
func envMetadataRefs(c *corev1.Container) MetadataRefs {
	var r MetadataRefs
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			continue
		}
		m := fieldRefPath.FindStringSubmatch(e.ValueFrom.FieldRef.FieldPath)
		if m == nil {
			continue
		}
		if m[1] == "labels" {
			r.Labels = append(r.Labels, m[2])
		} else {
			r.Annotations = append(r.Annotations, m[2])
		}
	}
	sort.Strings(r.Labels)
	sort.Strings(r.Annotations)
	return r
}

// ExpectedEnv is the env c gets from pod's labels and annotations through
// the Downward API, by variable name, as the kubelet resolves it now (a
// missing key gives ""). Nil when c's env reads no metadata.
func ExpectedEnv(pod *corev1.Pod, c *corev1.Container) map[string]string {
	var out map[string]string
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			continue
		}
		m := fieldRefPath.FindStringSubmatch(e.ValueFrom.FieldRef.FieldPath)
		if m == nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		if m[1] == "labels" {
			out[e.Name] = pod.Labels[m[2]]
		} else {
			out[e.Name] = pod.Annotations[m[2]]
		}
	}
	return out
}

// firstDifference names the first field of the pod specs a and b that
// differs (containers by name), for NotInPlaceError.
func firstDifference(a, b *corev1.PodSpec) string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range va.NumField() {
		f := va.Type().Field(i)
		if apiequality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			continue
		}
		name := jsonName(f)
		if name == "containers" {
			for j := range a.Containers {
				if path := containerDifference(&a.Containers[j], &b.Containers[j]); path != "" {
					return fmt.Sprintf("spec.containers[%s].%s", a.Containers[j].Name, path)
				}
			}
		}
		return "spec." + name
	}
	return "spec"
}

// containerDifference names the first field of two containers that
// differs, or "".
func containerDifference(a, b *corev1.Container) string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range va.NumField() {
		if !apiequality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return jsonName(va.Type().Field(i))
		}
	}
	return ""
}

// jsonName is a struct field's JSON name.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}
