package inplace

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// EnvContainerBarrier is the env var the container launch priority webhook
// gives every container of a prioritized pod: a configMapKeyRef whose key
// is p_<priority>. In-place updates follow the same order.
const EnvContainerBarrier = wellknown.EnvContainerBarrier

// Priorities returns the launch priority of each container of pod, nil
// when the pod has none: from the barrier env the launch-priority webhook
// injects, else from what that webhook reads (a container's
// KRUISE_CONTAINER_PRIORITY env, or the pod's
// apps.kruise.io/container-launch-priority: Ordered, first container
// highest), so pods created without the webhook update in the same order.
// In a pod with priorities, a container without one has priority 0.
func Priorities(pod *corev1.Pod) map[string]int {
	out := map[string]int{}
	ordered := pod.Annotations[wellknown.AnnotationContainerLaunchPriority] == wellknown.ContainerLaunchPriorityOrdered
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if p, ok := priority(c); ok {
			out[c.Name] = p
		} else if ordered {
			out[c.Name] = -i
		}
	}
	if len(out) == 0 {
		return nil
	}
	for i := range pod.Spec.Containers {
		if _, ok := out[pod.Spec.Containers[i].Name]; !ok {
			out[pod.Spec.Containers[i].Name] = 0
		}
	}
	return out
}

// priority returns c's launch priority from its barrier env or its
// KRUISE_CONTAINER_PRIORITY env, if it has one.
func priority(c *corev1.Container) (int, bool) {
	for _, e := range c.Env {
		if e.Name == EnvContainerBarrier && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			p, err := strconv.Atoi(strings.TrimPrefix(e.ValueFrom.ConfigMapKeyRef.Key, "p_"))
			return p, err == nil
		}
	}
	for _, e := range c.Env {
		if e.Name == wellknown.EnvContainerPriority && e.ValueFrom == nil {
			p, err := strconv.Atoi(e.Value)
			return p, err == nil
		}
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
// nothing waits). In a pod without launch priorities every container
// goes now; in one with them, only the highest priority among the
// changed containers goes now. A container that
// reads a changed label or annotation that a container of this batch also
// reads joins the batch: the key changes once, for both. Label and
// annotation changes read only by waiting containers wait with them.
func Split(pod *corev1.Pod, s *Spec) (now, next *Spec) {
	prio := Priorities(pod)
	changed := s.containers()
	top, found := 0, false
	for _, c := range changed {
		if p, ok := prio[c]; ok && (!found || p > top) {
			top, found = p, true
		}
	}
	inNow := map[string]bool{}
	for _, c := range changed {
		p, ok := prio[c]
		inNow[c] = !ok || p == top
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
