package inplace

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// EnvContainerBarrier is the env var the container launch priority webhook
// gives every container of a prioritized pod: a configMapKeyRef whose key
// is p_<priority>. In-place updates follow the same order.
const EnvContainerBarrier = "KRUISE_CONTAINER_BARRIER"

// priority returns c's launch priority from its barrier env, if it has one.
func priority(c *corev1.Container) (int, bool) {
	for _, e := range c.Env {
		if e.Name != EnvContainerBarrier || e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
			continue
		}
		p, err := strconv.Atoi(strings.TrimPrefix(e.ValueFrom.ConfigMapKeyRef.Key, "p_"))
		return p, err == nil
	}
	return 0, false
}

// containers lists the containers s changes (image or env), sorted.
func (s *Spec) containers() []string {
	set := map[string]bool{}
	for c := range s.Images {
		set[c] = true
	}
	for c := range s.EnvFromMetadata {
		set[c] = true
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Split divides s into the batch to apply to pod now and the rest, which
// waits until this batch's containers run and are ready (nil when
// nothing waits). Containers without a launch priority always go now; of
// those with one, only the highest priority goes now. A container that
// reads a changed label or annotation that a container of this batch also
// reads joins the batch: the key changes once, for both. Label and
// annotation changes read only by waiting containers wait with them.
func Split(pod *corev1.Pod, s *Spec) (now, next *Spec) {
	prio := map[string]int{}
	hasPrio := map[string]bool{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		prio[c.Name], hasPrio[c.Name] = priority(c)
	}
	changed := s.containers()
	top, found := 0, false
	for _, c := range changed {
		if hasPrio[c] && (!found || prio[c] > top) {
			top, found = prio[c], true
		}
	}
	inNow := map[string]bool{}
	for _, c := range changed {
		inNow[c] = !hasPrio[c] || prio[c] == top
	}
	// Containers sharing a changed key with the batch join it, until no
	// more join.
	for grew := true; grew; {
		grew = false
		for _, c := range changed {
			if inNow[c] {
				continue
			}
			for _, o := range changed {
				if inNow[o] && sharesKey(s.EnvFromMetadata[c], s.EnvFromMetadata[o]) {
					inNow[c], grew = true, true
					break
				}
			}
		}
	}

	now = &Spec{Revision: s.Revision}
	later := &Spec{Revision: s.Revision}
	deferLabels, deferAnnotations := map[string]bool{}, map[string]bool{}
	for _, c := range changed {
		dst := now
		if !inNow[c] {
			dst = later
			for _, k := range s.EnvFromMetadata[c].Labels {
				deferLabels[k] = true
			}
			for _, k := range s.EnvFromMetadata[c].Annotations {
				deferAnnotations[k] = true
			}
		}
		if img, ok := s.Images[c]; ok {
			if dst.Images == nil {
				dst.Images = map[string]string{}
			}
			dst.Images[c] = img
		}
		if refs, ok := s.EnvFromMetadata[c]; ok {
			if dst.EnvFromMetadata == nil {
				dst.EnvFromMetadata = map[string]MetadataRefs{}
			}
			dst.EnvFromMetadata[c] = refs
		}
	}
	now.Labels, later.Labels = splitKeys(s.Labels, deferLabels)
	now.Annotations, later.Annotations = splitKeys(s.Annotations, deferAnnotations)
	if later.Empty() {
		return now, nil
	}
	return now, later
}

// sharesKey reports whether two containers' refs have a key in common.
func sharesKey(a, b MetadataRefs) bool {
	return overlap(a.Labels, b.Labels) || overlap(a.Annotations, b.Annotations)
}

func overlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// splitKeys divides changes into the keys not in deferred and those in it.
func splitKeys(changes map[string]*string, deferred map[string]bool) (now, later map[string]*string) {
	for k, v := range changes {
		if deferred[k] {
			if later == nil {
				later = map[string]*string{}
			}
			later[k] = v
			continue
		}
		if now == nil {
			now = map[string]*string{}
		}
		now[k] = v
	}
	return now, later
}
