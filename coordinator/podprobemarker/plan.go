package podprobemarker

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// nameSep joins a PodProbeMarker's name and a probe's name into the
// probe's name on the node ("<marker>#<probe>"), as OpenKruise's
// NodePodProbe does.
const nameSep = "#"

// probeName is the node-side name of marker's probe.
func probeName(marker, probe string) string { return marker + nameSep + probe }

// eligible reports whether pod's probes run, as OpenKruise decides: the
// pod is active (not terminal, not being deleted), scheduled, initialized
// and has an IP.
func eligible(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.Spec.NodeName == "" || pod.Status.PodIP == "" {
		return false
	}
	c := podstatus.Condition(pod, corev1.PodInitialized)
	return c != nil && c.Status == corev1.ConditionTrue
}

// selects reports whether marker selects pod (same namespace, selector).
func selects(marker *v1alpha1.PodProbeMarker, pod *corev1.Pod) bool {
	if marker.Namespace != pod.Namespace || marker.DeletionTimestamp != nil || marker.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(marker.Spec.Selector)
	if err != nil || sel.Empty() {
		return false
	}
	return sel.Matches(labels.Set(pod.Labels))
}

// podProbes returns the probe work of pod: every probe of every marker
// that selects it, in marker and probe order, with named ports resolved
// from the container spec. It returns nil when no marker selects the pod
// or it is not eligible. A probe whose container or named port the pod
// lacks is left out and named in skipped.
func podProbes(markers []*v1alpha1.PodProbeMarker, pod *corev1.Pod) (spec *nodeworkv1.ProbeSpec, skipped []string) {
	if !eligible(pod) {
		return nil, nil
	}
	markers = slices.Clone(markers)
	slices.SortFunc(markers, func(a, b *v1alpha1.PodProbeMarker) int { return strings.Compare(a.Name, b.Name) })
	var probes []*nodeworkv1.PodProbe
	for _, m := range markers {
		if !selects(m, pod) {
			continue
		}
		for i := range m.Spec.Probes {
			p := &m.Spec.Probes[i]
			name := probeName(m.Name, p.Name)
			c := container(pod, p.ContainerName)
			if c == nil {
				skipped = append(skipped, fmt.Sprintf("%s: the pod has no container %q", name, p.ContainerName))
				continue
			}
			probe, err := resolvePorts(p.Probe.Probe, c)
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			raw, err := json.Marshal(probe)
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			probes = append(probes, &nodeworkv1.PodProbe{Name: name, ContainerName: p.ContainerName, ProbeJson: raw})
		}
	}
	if len(probes) == 0 {
		return nil, skipped
	}
	if len(probes) > nodework.MaxPodProbes {
		skipped = append(skipped, fmt.Sprintf("%d probes: only the first %d run", len(probes), nodework.MaxPodProbes))
		probes = probes[:nodework.MaxPodProbes]
	}
	return &nodeworkv1.ProbeSpec{
		PodUid: string(pod.UID), PodNamespace: pod.Namespace, PodName: pod.Name, PodIp: pod.Status.PodIP, Probes: probes,
	}, skipped
}

// resolvePorts returns probe with a named tcpSocket or httpGet port
// replaced by the container's port number of that name.
func resolvePorts(probe corev1.Probe, c *corev1.Container) (corev1.Probe, error) {
	resolve := func(port intstr.IntOrString) (intstr.IntOrString, error) {
		if port.Type == intstr.Int {
			return port, nil
		}
		for _, p := range c.Ports {
			if p.Name == port.StrVal {
				return intstr.FromInt32(p.ContainerPort), nil
			}
		}
		return port, fmt.Errorf("container %q has no port named %q", c.Name, port.StrVal)
	}
	var err error
	switch {
	case probe.TCPSocket != nil:
		tcp := *probe.TCPSocket
		tcp.Port, err = resolve(tcp.Port)
		probe.TCPSocket = &tcp
	case probe.HTTPGet != nil:
		get := *probe.HTTPGet
		get.Port, err = resolve(get.Port)
		probe.HTTPGet = &get
	}
	return probe, err
}

func container(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// podUpdate is what a pod must change to show its probes' states.
type podUpdate struct {
	// conditions are the pod conditions to set (the status subresource).
	conditions []corev1.PodCondition
	// metadata maps label and annotation keys to their new value, nil to
	// remove the key.
	labels, annotations map[string]*string
	// flips describe the marker policies that change, for the pod's
	// Event.
	flips []string
}

// empty reports whether the pod already shows the states.
func (u *podUpdate) empty() bool {
	return len(u.conditions) == 0 && len(u.labels) == 0 && len(u.annotations) == 0
}

// changes returns what pod must change to show results (by node-side probe
// name), as OpenKruise's controller applies a NodePodProbe's status: for a
// probe with a podConditionType, the condition True when Succeeded and
// False otherwise, with the message and times; the labels and annotations
// of the marker policy of the probe's state set, and the keys of the
// marker's other policies removed (an Unknown state removes them all). The
// first marker (by name) that claims a condition type owns it. Nothing in
// the result is already true of pod.
func changes(markers []*v1alpha1.PodProbeMarker, pod *corev1.Pod, results map[string]*nodeworkv1.ProbeResult) *podUpdate {
	u := &podUpdate{labels: map[string]*string{}, annotations: map[string]*string{}}
	markers = slices.Clone(markers)
	slices.SortFunc(markers, func(a, b *v1alpha1.PodProbeMarker) int { return strings.Compare(a.Name, b.Name) })
	claimed := map[string]bool{}
	for _, m := range markers {
		if !selects(m, pod) {
			continue
		}
		for i := range m.Spec.Probes {
			p := &m.Spec.Probes[i]
			r := results[probeName(m.Name, p.Name)]
			if r == nil {
				continue
			}
			state := stateOf(r.GetState())
			if t := p.PodConditionType; t != "" && !claimed[t] {
				claimed[t] = true
				if c, changed := condition(pod, corev1.PodConditionType(t), state, r); changed {
					u.conditions = append(u.conditions, c)
				}
			}
			setLabels, setAnnotations := map[string]string{}, map[string]string{}
			var dropLabels, dropAnnotations []string
			for _, policy := range p.MarkerPolicy {
				if policy.State == state {
					maps.Copy(setLabels, policy.Labels)
					maps.Copy(setAnnotations, policy.Annotations)
					continue
				}
				dropLabels = append(dropLabels, slices.Collect(maps.Keys(policy.Labels))...)
				dropAnnotations = append(dropAnnotations, slices.Collect(maps.Keys(policy.Annotations))...)
			}
			n := len(u.labels) + len(u.annotations)
			apply(u.labels, pod.Labels, setLabels, dropLabels)
			apply(u.annotations, pod.Annotations, setAnnotations, dropAnnotations)
			if len(u.labels)+len(u.annotations) > n {
				u.flips = append(u.flips, fmt.Sprintf("%s is %s", probeName(m.Name, p.Name), state))
			}
		}
	}
	return u
}

// apply records in out the changes that make have hold every key of set
// with its value, and none of drop that set lacks.
func apply(out map[string]*string, have, set map[string]string, drop []string) {
	for k, v := range set {
		if cur, ok := have[k]; !ok || cur != v {
			out[k] = &v
		}
	}
	for _, k := range drop {
		if _, keep := set[k]; keep {
			continue
		}
		if _, ok := have[k]; ok {
			out[k] = nil
		}
	}
}

// stateOf maps a node-side state to the marker policy states.
func stateOf(s nodeworkv1.ProbeState) v1alpha1.ProbeState {
	switch s {
	case nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED:
		return v1alpha1.ProbeSucceeded
	case nodeworkv1.ProbeState_PROBE_STATE_FAILED:
		return v1alpha1.ProbeFailed
	default:
		return v1alpha1.ProbeUnknown
	}
}

// condition returns the pod condition t showing state and whether the pod
// shows something else now.
func condition(pod *corev1.Pod, t corev1.PodConditionType, state v1alpha1.ProbeState, r *nodeworkv1.ProbeResult) (corev1.PodCondition, bool) {
	status := corev1.ConditionFalse
	if state == v1alpha1.ProbeSucceeded {
		status = corev1.ConditionTrue
	}
	c := corev1.PodCondition{Type: t, Status: status, Message: r.GetMessage()}
	if ns := r.GetLastProbeUnixNanos(); ns > 0 {
		c.LastProbeTime = metav1.NewTime(time.Unix(0, ns).UTC())
	}
	if ns := r.GetLastTransitionUnixNanos(); ns > 0 {
		c.LastTransitionTime = metav1.NewTime(time.Unix(0, ns).UTC())
	}
	cur := podstatus.Condition(pod, t)
	if cur == nil {
		return c, true
	}
	if cur.Status == status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	same := cur.Status == c.Status && cur.Message == c.Message &&
		cur.LastProbeTime.Unix() == c.LastProbeTime.Unix()
	return c, !same
}

// patch is the strategic merge patch of a podUpdate, for the pods/status
// subresource: the conditions (merged by type) and the labels and
// annotations (a null removes a key; the status subresource of a pod
// keeps metadata changes), with the pod's UID as a precondition. One
// request per pod change: the coordinator's API budget decides how fast a
// flip of many pods shows (make bench-probes).
func (u *podUpdate) patch(uid string) ([]byte, error) {
	meta := map[string]any{"uid": uid}
	if len(u.labels) > 0 {
		meta["labels"] = u.labels
	}
	if len(u.annotations) > 0 {
		meta["annotations"] = u.annotations
	}
	body := map[string]any{"metadata": meta}
	if len(u.conditions) > 0 {
		// Each condition names every field: a strategic merge keeps the
		// fields a patch leaves out, and an empty message (a probe that
		// succeeded silently) must clear the last failure's.
		conds := make([]map[string]any, 0, len(u.conditions))
		for _, c := range u.conditions {
			conds = append(conds, map[string]any{
				"type": c.Type, "status": c.Status, "message": c.Message,
				"lastProbeTime": c.LastProbeTime, "lastTransitionTime": c.LastTransitionTime,
			})
		}
		body["status"] = map[string]any{"conditions": conds}
	}
	return json.Marshal(body)
}

// describe is the Event text of a podUpdate.
func (u *podUpdate) describe() string {
	var parts []string
	keys := func(m map[string]*string) (set, removed []string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if m[k] == nil {
				removed = append(removed, k)
			} else {
				set = append(set, k+"="+*m[k])
			}
		}
		return set, removed
	}
	ls, lr := keys(u.labels)
	as, ar := keys(u.annotations)
	if len(u.flips) > 0 {
		parts = append(parts, strings.Join(u.flips, ", "))
	}
	if len(ls) > 0 {
		parts = append(parts, "labels set: "+strings.Join(ls, ", "))
	}
	if len(lr) > 0 {
		parts = append(parts, "labels removed: "+strings.Join(lr, ", "))
	}
	if len(as) > 0 {
		parts = append(parts, "annotations set: "+strings.Join(as, ", "))
	}
	if len(ar) > 0 {
		parts = append(parts, "annotations removed: "+strings.Join(ar, ", "))
	}
	return strings.Join(parts, "; ")
}
