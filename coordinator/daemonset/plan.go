package daemonset

import (
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/coordinator/workload/lifecycle"
	"github.com/shoal-io/shoal/coordinator/workload/placement"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// deletion is a pod to delete and why.
type deletion struct {
	pod *corev1.Pod
	why string
}

// plan is one pass's decisions about a DaemonSet, from the nodes and its
// pods as the informers show them; it is pure (no API calls).
type plan struct {
	// create are the nodes to give a pod of the update revision (a node
	// without a pod, or a surge pod next to an old one).
	create []string
	// deletes are pods to delete (through the preDelete hook).
	deletes []deletion
	// updates are old pods to move to the update revision in place
	// (rollingUpdateType InPlaceIfPossible); the controller recreates
	// those that cannot be.
	updates []*corev1.Pod
	// status is the DaemonSet's new status (conditions kept).
	status v1beta1.DaemonSetStatus
	// requeueAfter asks to look again (a pod becoming available after
	// minReadySeconds).
	requeueAfter time.Duration
	// blocked says why the update does not go on, for logs ("" when it
	// does or is done).
	blocked string
}

// daemonTolerations are the tolerations every daemon pod gets, as the
// upstream DaemonSet controller gives them: a daemon runs on a node that
// is not ready, unreachable, under pressure or cordoned.
func daemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	want := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if spec.HostNetwork {
		want = append(want, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	out := slices.Clone(spec.Tolerations)
	for _, t := range want {
		if !slices.ContainsFunc(out, func(o corev1.Toleration) bool { return o.Key == t.Key && o.Effect == t.Effect }) {
			out = append(out, t)
		}
	}
	return out
}

// hashOf is the revision hash a pod was built from.
func hashOf(p *corev1.Pod) string { return p.Labels[wellknown.LabelControllerRevisionHash] }

// preparingDelete reports whether the pod waits in PreparingDelete.
func preparingDelete(p *corev1.Pod) bool {
	return lifecycle.State(p) == wellknown.LifecycleStatePreparingDelete
}

// available reports whether the pod serves: ready for minReady, and not on
// its way out.
func available(p *corev1.Pod, minReady time.Duration, now time.Time) bool {
	return !preparingDelete(p) && lifecycle.State(p) != wellknown.LifecycleStatePreparingNormal && podstatus.Available(p, minReady, now)
}

// nodeState is what the plan knows of one node.
type nodeState struct {
	node                     *corev1.Node
	shouldRun, shouldKeepPod bool
	old, updated             []*corev1.Pod
}

// scaled resolves an int-or-percent of desired, rounded up.
func scaled(field string, v *intstr.IntOrString, desired int, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, desired, true)
	if err != nil {
		return 0, fmt.Errorf("spec.updateStrategy.rollingUpdate.%s %q: %w", field, v.String(), err)
	}
	return n, nil
}

// newPlan decides what to do with ds's pods (not being deleted) at now,
// given the nodes and the update revision's hash.
// Nodes in backoff (a daemon pod failed there lately) get no new pod
// until their time in backoff, which the plan comes back for.
func newPlan(ds *v1beta1.DaemonSet, nodes []*corev1.Node, pods []*corev1.Pod, hash string, now time.Time, backoff map[string]time.Time) (*plan, error) {
	p := &plan{status: *ds.Status.DeepCopy()}
	minReady := time.Duration(ds.Spec.MinReadySeconds) * time.Second
	spec := ds.Spec.Template.Spec.DeepCopy()
	spec.Tolerations = daemonTolerations(spec)

	byNode := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		byNode[placement.TargetNode(pod)] = append(byNode[placement.TargetNode(pod)], pod)
	}
	known := map[string]bool{}
	var states []*nodeState
	for _, n := range nodes {
		known[n.Name] = true
		s := &nodeState{
			node:          n,
			shouldRun:     placement.Eligible(spec, n),
			shouldKeepPod: placement.Selects(spec, n) && placement.Tolerates(spec, n, corev1.TaintEffectNoExecute),
		}
		for _, pod := range byNode[n.Name] {
			if pod.Status.Phase == corev1.PodFailed {
				// Failed daemon pods are replaced.
				p.deletes = append(p.deletes, deletion{pod, "it failed"})
				continue
			}
			if hashOf(pod) == hash {
				s.updated = append(s.updated, pod)
			} else {
				s.old = append(s.old, pod)
			}
		}
		states = append(states, s)
	}
	for name, ps := range byNode {
		if !known[name] {
			for _, pod := range ps {
				p.deletes = append(p.deletes, deletion{pod, fmt.Sprintf("its node %q is gone", name)})
			}
		}
	}
	sort.Slice(states, func(i, j int) bool { return states[i].node.Name < states[j].node.Name })

	st := &p.status
	st.ObservedGeneration = ds.Generation
	st.UpdateRevision = hash
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberMisscheduled = 0, 0, 0
	st.NumberReady, st.NumberAvailable, st.UpdatedNumberScheduled = 0, 0, 0
	var unavailable int
	for _, s := range states {
		all := append(slices.Clone(s.updated), s.old...)
		if !s.shouldKeepPod {
			if len(all) > 0 {
				st.NumberMisscheduled++
			}
			for _, pod := range all {
				p.deletes = append(p.deletes, deletion{pod, fmt.Sprintf("node %s should not run it", s.node.Name)})
			}
			continue
		}
		if !s.shouldRun && len(all) == 0 {
			continue
		}
		st.DesiredNumberScheduled++
		if len(all) == 0 {
			if until, ok := backoff[s.node.Name]; ok && until.After(now) {
				if d := until.Sub(now); p.requeueAfter == 0 || d < p.requeueAfter {
					p.requeueAfter = d
				}
			} else {
				p.create = append(p.create, s.node.Name)
			}
			unavailable++
			continue
		}
		st.CurrentNumberScheduled++
		if len(s.updated) > 0 {
			st.UpdatedNumberScheduled++
		}
		if slices.ContainsFunc(all, func(x *corev1.Pod) bool { return podstatus.ReadySince(x) != nil }) {
			st.NumberReady++
		}
		if slices.ContainsFunc(all, func(x *corev1.Pod) bool { return available(x, minReady, now) }) {
			st.NumberAvailable++
		} else {
			unavailable++
		}
		// A pod ready but not yet for minReadySeconds: look again when it
		// becomes available (a surge pod's old pod then goes).
		for _, x := range all {
			if since := podstatus.ReadySince(x); since != nil && !preparingDelete(x) {
				if d := since.Add(minReady).Sub(now); d > 0 && (p.requeueAfter == 0 || d < p.requeueAfter) {
					p.requeueAfter = d + 100*time.Millisecond
				}
			}
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable

	// scaleStrategy.partitionedScaling (v1alpha1: the progressive-create
	// annotation): with a partition, new pods go only to as many nodes as
	// the partition leaves to the update revision, first node names first.
	if ss, ru := ds.Spec.ScaleStrategy, ds.Spec.UpdateStrategy.RollingUpdate; ss != nil && ss.PartitionedScaling &&
		ds.Spec.UpdateStrategy.Type != v1beta1.OnDeleteDaemonSetStrategyType && ru != nil && ru.Partition != nil {
		desired := int(st.DesiredNumberScheduled)
		partition, err := scaled("partition", ru.Partition, desired, 0)
		if err != nil {
			return nil, err
		}
		if partition != 0 {
			partition = min(max(partition, 0), desired)
			maxCreate := max(desired-int(st.UpdatedNumberScheduled)-partition, 0)
			slices.Sort(p.create)
			p.create = p.create[:min(len(p.create), maxCreate)]
		}
	}

	if err := p.update(ds, states, int(st.DesiredNumberScheduled), unavailable, minReady, now); err != nil {
		return nil, err
	}
	return p, nil
}

// update plans the rolling update: old pods on the nodes the selector
// picks, beyond partition, within maxUnavailable (or, with maxSurge, a new
// pod next to the old one, which goes once the new one is available).
// Extra pods on a node (two of the update revision) go too.
func (p *plan) update(ds *v1beta1.DaemonSet, states []*nodeState, desired, unavailable int, minReady time.Duration, now time.Time) error {
	for _, s := range states {
		if len(s.updated) > 1 {
			// Keep the oldest pod of the update revision.
			sort.Slice(s.updated, func(i, j int) bool { return s.updated[i].CreationTimestamp.Before(&s.updated[j].CreationTimestamp) })
			for _, extra := range s.updated[1:] {
				p.deletes = append(p.deletes, deletion{extra, "a second pod on node " + s.node.Name})
			}
		}
	}
	strategy := ds.Spec.UpdateStrategy
	if strategy.Type == v1beta1.OnDeleteDaemonSetStrategyType {
		return nil
	}
	ru := strategy.RollingUpdate
	if ru == nil {
		ru = &v1beta1.RollingUpdateDaemonSet{}
	}
	if ptr.Deref(ru.Paused, false) {
		p.blocked = "paused"
		return nil
	}
	maxSurge, err := scaled("maxSurge", ru.MaxSurge, desired, 0)
	if err != nil {
		return err
	}
	defUnavailable := 1
	if maxSurge > 0 {
		defUnavailable = 0
	}
	maxUnavailable, err := scaled("maxUnavailable", ru.MaxUnavailable, desired, defUnavailable)
	if err != nil {
		return err
	}
	partition, err := scaled("partition", ru.Partition, desired, 0)
	if err != nil {
		return err
	}
	var selector labels.Selector
	if ru.Selector != nil {
		if selector, err = metav1.LabelSelectorAsSelector(ru.Selector); err != nil {
			return fmt.Errorf("spec.updateStrategy.rollingUpdate.selector: %w", err)
		}
	}

	// The nodes still on the old revision that the update may reach:
	// those the selector picks, beyond partition. As OpenKruise's,
	// partition counts the nodes that run a pod, and the update goes from
	// the last node name backwards (the first ones keep the old revision);
	// nodes already part way (a surge pod next to the old one) come first.
	var updated, withPods int
	var todo []*nodeState
	for _, s := range states {
		switch {
		case !s.shouldKeepPod || len(s.old)+len(s.updated) == 0:
			continue
		case len(s.old) == 0:
			updated++
		case selector != nil && !selector.Matches(labels.Set(s.node.Labels)):
		default:
			todo = append(todo, s)
		}
		withPods++
	}
	sort.SliceStable(todo, func(i, j int) bool {
		if pi, pj := len(todo[i].updated) > 0, len(todo[j].updated) > 0; pi != pj {
			return pi
		}
		return todo[i].node.Name > todo[j].node.Name
	})
	allowed := max(withPods-partition-updated, 0)
	if len(todo) > allowed {
		p.blocked = fmt.Sprintf("partition %d keeps %d nodes at the old revision", partition, len(todo)-allowed)
	}
	todo = todo[:min(len(todo), allowed)]

	if maxSurge > 0 {
		surging := 0
		for _, s := range states {
			if len(s.old) > 0 && len(s.updated) > 0 {
				surging++
			}
		}
		for _, s := range todo {
			switch {
			case len(s.updated) > 0:
				if slices.ContainsFunc(s.updated, func(x *corev1.Pod) bool { return available(x, minReady, now) }) {
					for _, old := range s.old {
						p.deletes = append(p.deletes, deletion{old, "its replacement on node " + s.node.Name + " is available"})
					}
				}
			case surging < maxSurge:
				p.create = append(p.create, s.node.Name)
				surging++
			}
		}
		return nil
	}

	// Without surge: old pods that are unavailable anyway first, then
	// available ones within maxUnavailable.
	budget := maxUnavailable - unavailable
	sort.SliceStable(todo, func(i, j int) bool {
		return !nodeAvailable(todo[i], minReady, now) && nodeAvailable(todo[j], minReady, now)
	})
	inPlace := ru.Type == v1beta1.InplaceRollingUpdateType
	for _, s := range todo {
		if nodeAvailable(s, minReady, now) {
			if budget <= 0 {
				continue
			}
			budget--
		}
		for _, old := range s.old {
			if inPlace && !preparingDelete(old) {
				p.updates = append(p.updates, old)
			} else {
				p.deletes = append(p.deletes, deletion{old, "recreated at the update revision"})
			}
		}
	}
	return nil
}

// nodeAvailable reports whether the node has an available pod.
func nodeAvailable(s *nodeState, minReady time.Duration, now time.Time) bool {
	return slices.ContainsFunc(append(slices.Clone(s.old), s.updated...), func(x *corev1.Pod) bool { return available(x, minReady, now) })
}
