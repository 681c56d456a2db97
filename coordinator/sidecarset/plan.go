package sidecarset

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/coordinator/sidecarset/sidecarcontrol"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/coordinator/workload/updatesort"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// target is the version of a SidecarSet the controller rolls pods to.
type target struct {
	set *v1beta1.SidecarSet
	// hash and hashWithoutImage are sidecarcontrol.Hashes of set.
	hash, hashWithoutImage string
	// revision is the name of the set's latest ControllerRevision.
	revision string
}

// podState is one matched pod seen against a target.
type podState struct {
	pod *corev1.Pod
	// updated: the pod's sidecars are at the target's hash.
	updated bool
	// upgradable: the pod differs from the target in images only (its
	// hash without images matches), so its sidecars can be updated in
	// place.
	upgradable bool
	// consistent: every sidecar the controller changed last runs a new
	// container instance (the kubelet restarted it on the new image).
	consistent bool
	// busy: a sidecar is ready but not consistent yet, an earlier
	// update still on its way; the pod waits for it.
	busy bool
	// ready: the pod is Ready, and each hot-upgrade pair's idle container
	// holds the empty image.
	ready bool
}

// available is whether the pod counts as serving in maxUnavailable terms.
func (s podState) available() bool { return s.consistent && s.ready }

// containerNames returns the pod container names of the set's sidecars
// (both containers of a hot-upgrade pair).
func containerNames(set *v1beta1.SidecarSet) []string {
	var names []string
	for i := range set.Spec.Containers {
		c := &set.Spec.Containers[i]
		if sidecarcontrol.IsHotUpgrade(c) {
			a, b := sidecarcontrol.HotUpgradeNames(c.Name)
			names = append(names, a, b)
			continue
		}
		names = append(names, c.Name)
	}
	return names
}

// injected reports whether the pod was injected with set (it carries an
// entry of set in its hash annotation) and still has the containers the
// set's spec says it should: a pod injected under another upgradeType of
// a container of the same name is left alone (kruise#855).
func injected(set *v1beta1.SidecarSet, pod *corev1.Pod) bool {
	if _, ok := sidecarcontrol.PodUpgradeSpecs(pod, wellknown.AnnotationSidecarSetHash)[set.Name]; !ok {
		return false
	}
	for _, name := range containerNames(set) {
		if containerSpec(pod, name) == nil {
			return false
		}
	}
	return true
}

// active reports whether the pod may still run: not terminal, not being
// deleted.
func active(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// classify sees pod against t.
func classify(t *target, pod *corev1.Pod) podState {
	s := podState{pod: pod}
	s.updated = sidecarcontrol.PodUpgradeSpecs(pod, wellknown.AnnotationSidecarSetHash)[t.set.Name].Hash == t.hash
	s.upgradable = sidecarcontrol.PodUpgradeSpecs(pod, wellknown.AnnotationSidecarSetHashWithoutImage)[t.set.Name].Hash == t.hashWithoutImage
	names := containerNames(t.set)
	s.consistent = consistent(t.set.Name, pod, names)
	for _, name := range names {
		if podstatus.ContainerReady(pod, name) && !consistent(t.set.Name, pod, []string{name}) {
			s.busy = true
		}
	}
	s.ready = podReady(t.set, pod)
	return s
}

// podReady is the pod's Ready condition, and false while a hot-upgrade
// pair's idle container does not hold the empty image (a flip is still
// to come).
func podReady(set *v1beta1.SidecarSet, pod *corev1.Pod) bool {
	if c := podstatus.Condition(pod, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	working := sidecarcontrol.WorkingHotUpgradeContainers(pod)
	for i := range set.Spec.Containers {
		c := &set.Spec.Containers[i]
		if !sidecarcontrol.IsHotUpgrade(c) {
			continue
		}
		if idle := idleOf(c.Name, working[c.Name]); idle != "" {
			if spec := containerSpec(pod, idle); spec != nil && spec.Image != c.UpgradeStrategy.HotUpgradeEmptyImage {
				return false
			}
		}
	}
	return true
}

// idleOf returns the container of sidecar's hot-upgrade pair that is not
// working ("" when working names neither).
func idleOf(sidecar, working string) string {
	a, b := sidecarcontrol.HotUpgradeNames(sidecar)
	switch working {
	case a:
		return b
	case b:
		return a
	}
	return ""
}

// updateStates reads the pod's SidecarSet in-place update states.
func updateStates(pod *corev1.Pod) map[string]pub.InPlaceUpdateState {
	m := map[string]pub.InPlaceUpdateState{}
	if v := pod.Annotations[wellknown.AnnotationSidecarSetInPlaceUpdateState]; v != "" {
		_ = json.Unmarshal([]byte(v), &m)
	}
	return m
}

// consistent reports whether each of names that set's last in-place
// update changed now runs a new container instance: another container
// ID (or, when none was recorded, another image ID) than before the
// update. A pod never updated in place is consistent.
func consistent(setName string, pod *corev1.Pod, names []string) bool {
	st, ok := updateStates(pod)[setName]
	if !ok {
		return true
	}
	for _, name := range names {
		last, changed := st.LastContainerStatuses[name]
		if !changed {
			continue
		}
		cs := containerStatus(pod, name)
		if cs == nil {
			return false
		}
		if last.ContainerID != "" {
			if cs.ContainerID == "" || cs.ContainerID == last.ContainerID {
				return false
			}
			continue
		}
		if cs.ImageID == last.ImageID {
			return false
		}
	}
	return true
}

// computeStatus counts the matched pods as OpenKruise does: readyPods are
// consistent and ready, updatedReadyPods also updated.
func computeStatus(t *target, states []podState) v1beta1.SidecarSetStatus {
	st := v1beta1.SidecarSetStatus{
		ObservedGeneration: t.set.Generation,
		MatchedPods:        int32(len(states)),
		LatestRevision:     t.revision,
		CollisionCount:     t.set.Status.CollisionCount,
	}
	for _, s := range states {
		if s.updated {
			st.UpdatedPods++
		}
		if s.available() {
			st.ReadyPods++
			if s.updated {
				st.UpdatedReadyPods++
			}
		}
	}
	return st
}

// pick chooses the pods to update now, and the pods that are behind but
// cannot be updated in place (more than images changed). Of the pods not
// updated and picked by updateStrategy.selector, partition (a number or
// a percentage of the matched pods, rounded down) stay behind; the rest
// go in the order of the priority and scatter strategies (and the usual
// pod order: unready first), as long as the updated pods that are not
// available stay within maxUnavailable (default 1, percentages rounded
// down). A pod that is not available anyway does not take from that
// budget.
func pick(t *target, states []podState) (upgrade, notUpgradable []*corev1.Pod, err error) {
	strategy := t.set.Spec.UpdateStrategy
	var sel labels.Selector = labels.Everything()
	if strategy.Selector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(strategy.Selector); err != nil {
			return nil, nil, fmt.Errorf("spec.updateStrategy.selector: %w", err)
		}
	}
	pods := make([]*corev1.Pod, len(states))
	var waiting []int
	for i, s := range states {
		pods[i] = s.pod
		if s.updated || !sel.Matches(labels.Set(s.pod.Labels)) {
			continue
		}
		if !s.upgradable {
			notUpgradable = append(notUpgradable, s.pod)
			continue
		}
		if s.busy {
			continue
		}
		waiting = append(waiting, i)
	}
	waiting = updatesort.SortIndexes(pods, waiting, strategy.PriorityStrategy, strategy.ScatterStrategy)

	total := len(states)
	partition := 0
	if strategy.Partition != nil {
		if partition, err = intstr.GetScaledValueFromIntOrPercent(strategy.Partition, total, false); err != nil {
			return nil, nil, fmt.Errorf("spec.updateStrategy.partition: %w", err)
		}
	}
	if len(waiting) <= partition {
		return nil, notUpgradable, nil
	}
	waiting = waiting[:len(waiting)-partition]

	maxUnavailable := 1
	if strategy.MaxUnavailable != nil {
		if maxUnavailable, err = intstr.GetScaledValueFromIntOrPercent(strategy.MaxUnavailable, total, false); err != nil {
			return nil, nil, fmt.Errorf("spec.updateStrategy.maxUnavailable: %w", err)
		}
	}
	unavailable := 0
	for _, s := range states {
		if s.updated && !s.available() {
			unavailable++
		}
	}
	for _, i := range waiting {
		if !states[i].available() {
			upgrade = append(upgrade, pods[i])
			continue
		}
		if unavailable >= maxUnavailable {
			break
		}
		unavailable++
		upgrade = append(upgrade, pods[i])
	}
	return upgrade, notUpgradable, nil
}

// upgraded returns a copy of pod with its sidecars at t: each cold
// sidecar gets the new image; a hot-upgrade sidecar's new image goes to
// the pair's idle container (the one holding the empty image, else one
// that is not ready or not consistent, else the older one), which
// becomes the working container, with the version annotations moved
// along. It records the in-place update state of the containers it
// changed, the pod's hashes of the set and the set's patchPodMetadata.
// changed is false when nothing but the annotations needed to move.
func upgraded(t *target, pod *corev1.Pod, now metav1.Time) (*corev1.Pod, error) {
	p := pod.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	var changed []string
	working := sidecarcontrol.WorkingHotUpgradeContainers(p)
	for i := range t.set.Spec.Containers {
		sc := &t.set.Spec.Containers[i]
		if !sidecarcontrol.IsHotUpgrade(sc) {
			if c := containerSpec(p, sc.Name); c != nil && c.Image != sc.Image {
				c.Image = sc.Image
				changed = append(changed, sc.Name)
			}
			continue
		}
		cur := working[sc.Name]
		if c := containerSpec(p, cur); c != nil && c.Image == sc.Image {
			continue
		}
		next := hotTarget(t.set.Name, sc, p, cur)
		c := containerSpec(p, next)
		if c == nil {
			continue
		}
		c.Image = sc.Image
		changed = append(changed, next)
		old := idleOf(sc.Name, next)
		working[sc.Name] = next
		version := t.set.ResourceVersion
		p.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+next] = version
		p.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+next] = p.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+old]
		p.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+old] = version
	}
	if len(working) > 0 {
		b, err := json.Marshal(working)
		if err != nil {
			return nil, fmt.Errorf("encode working hot-upgrade containers: %w", err)
		}
		p.Annotations[wellknown.AnnotationSidecarSetWorkingHotUpgradeContainer] = string(b)
	}
	if err := recordUpdate(p, t.set.Name, t.hash, changed, now); err != nil {
		return nil, err
	}
	list := sidecarNames(t.set)
	for _, h := range []struct{ annotation, hash string }{
		{wellknown.AnnotationSidecarSetHash, t.hash},
		{wellknown.AnnotationSidecarSetHashWithoutImage, t.hashWithoutImage},
	} {
		spec := sidecarcontrol.UpgradeSpec{UpdateTimestamp: now, Hash: h.hash, SidecarSetName: t.set.Name, SidecarList: list, ControllerRevision: t.revision}
		if err := sidecarcontrol.SetPodUpgradeSpec(p, h.annotation, spec); err != nil {
			return nil, err
		}
	}
	if _, err := sidecarcontrol.PatchPodMetadata(&p.ObjectMeta, t.set.Spec.PatchPodMetadata); err != nil {
		return nil, fmt.Errorf("spec.patchPodMetadata: %w", err)
	}
	return p, nil
}

// sidecarNames are the names of the set's sidecars as its spec names
// them (a hot-upgrade sidecar by its own name): its native sidecar init
// containers (restartPolicy Always) and its containers, the list
// OpenKruise records on pods.
func sidecarNames(set *v1beta1.SidecarSet) []string {
	names := make([]string, 0, len(set.Spec.Containers))
	for i := range set.Spec.InitContainers {
		if c := &set.Spec.InitContainers[i].Container; sidecarcontrol.IsNativeSidecar(c) {
			names = append(names, c.Name)
		}
	}
	for i := range set.Spec.Containers {
		names = append(names, set.Spec.Containers[i].Name)
	}
	return names
}

// hotTarget picks the container of sc's pair to take the new image: the
// one holding the empty image, else one not ready or not consistent,
// else the one not working.
func hotTarget(setName string, sc *v1beta1.SidecarContainer, pod *corev1.Pod, working string) string {
	a, b := sidecarcontrol.HotUpgradeNames(sc.Name)
	for _, n := range []string{a, b} {
		if c := containerSpec(pod, n); c != nil && c.Image == sc.UpgradeStrategy.HotUpgradeEmptyImage {
			return n
		}
	}
	for _, n := range []string{a, b} {
		if !podstatus.ContainerReady(pod, n) || !consistent(setName, pod, []string{n}) {
			return n
		}
	}
	if idle := idleOf(sc.Name, working); idle != "" {
		return idle
	}
	return b
}

// recordUpdate writes set's in-place update state on pod: the revision,
// the time and the containers' instances before the update, by which
// consistent later tells that the kubelet restarted them.
func recordUpdate(pod *corev1.Pod, setName, revision string, changed []string, now metav1.Time) error {
	states := updateStates(pod)
	st := pub.InPlaceUpdateState{Revision: revision, UpdateTimestamp: now, LastContainerStatuses: map[string]pub.InPlaceUpdateContainerStatus{}}
	if prev, ok := states[setName]; ok && len(changed) == 0 {
		st.LastContainerStatuses = prev.LastContainerStatuses
	}
	for _, name := range changed {
		var last pub.InPlaceUpdateContainerStatus
		if cs := containerStatus(pod, name); cs != nil {
			last.ImageID, last.ContainerID = cs.ImageID, cs.ContainerID
		}
		st.LastContainerStatuses[name] = last
	}
	states[setName] = st
	b, err := json.Marshal(states)
	if err != nil {
		return fmt.Errorf("encode sidecar in-place update state: %w", err)
	}
	pod.Annotations[wellknown.AnnotationSidecarSetInPlaceUpdateState] = string(b)
	return nil
}

// needsFlip reports whether a hot upgrade of set on pod is done and the
// old container of a pair is to go back to the empty image: a pair's idle
// container does not hold the empty image, and every other sidecar of
// the set is consistent and ready.
func needsFlip(set *v1beta1.SidecarSet, pod *corev1.Pod) bool {
	working := sidecarcontrol.WorkingHotUpgradeContainers(pod)
	idle := map[string]bool{}
	pending := false
	for i := range set.Spec.Containers {
		c := &set.Spec.Containers[i]
		if !sidecarcontrol.IsHotUpgrade(c) {
			continue
		}
		n := idleOf(c.Name, working[c.Name])
		if n == "" {
			continue
		}
		idle[n] = true
		if spec := containerSpec(pod, n); spec != nil && spec.Image != c.UpgradeStrategy.HotUpgradeEmptyImage {
			pending = true
		}
	}
	if !pending {
		return false
	}
	for _, name := range containerNames(set) {
		if idle[name] {
			continue
		}
		if !podstatus.ContainerReady(pod, name) || !consistent(set.Name, pod, []string{name}) {
			return false
		}
	}
	return true
}

// flipped returns a copy of pod whose hot-upgrade pairs' idle containers
// go back to the empty image, with version "0" and the working
// container's versionalt "0".
func flipped(set *v1beta1.SidecarSet, pod *corev1.Pod, now metav1.Time) (*corev1.Pod, []string, error) {
	p := pod.DeepCopy()
	working := sidecarcontrol.WorkingHotUpgradeContainers(p)
	var reset []string
	for i := range set.Spec.Containers {
		c := &set.Spec.Containers[i]
		if !sidecarcontrol.IsHotUpgrade(c) {
			continue
		}
		n := idleOf(c.Name, working[c.Name])
		spec := containerSpec(p, n)
		if spec == nil || spec.Image == c.UpgradeStrategy.HotUpgradeEmptyImage {
			continue
		}
		spec.Image = c.UpgradeStrategy.HotUpgradeEmptyImage
		p.Annotations[wellknown.AnnotationSidecarSetVersionPrefix+n] = "0"
		p.Annotations[wellknown.AnnotationSidecarSetVersionAltPrefix+working[c.Name]] = "0"
		reset = append(reset, n)
	}
	if len(reset) == 0 {
		return nil, nil, nil
	}
	rev := updateStates(p)[set.Name].Revision
	if err := recordUpdate(p, set.Name, rev, reset, now); err != nil {
		return nil, nil, err
	}
	return p, reset, nil
}

// upgradableCondition returns the pod's SidecarSetUpgradable condition
// with setName's entry set to ok, as OpenKruise keeps it: the message a
// JSON map from SidecarSet name to whether it can update the pod, True
// only while all can. changed is false when the condition already says
// so.
func upgradableCondition(pod *corev1.Pod, setName string, ok bool, now metav1.Time) (corev1.PodCondition, bool) {
	cond := corev1.PodCondition{Type: wellknown.ConditionSidecarSetUpgradable}
	kv := map[string]bool{}
	if c := podstatus.Condition(pod, wellknown.ConditionSidecarSetUpgradable); c != nil {
		cond = *c.DeepCopy()
		_ = json.Unmarshal([]byte(c.Message), &kv)
	}
	before := maps.Clone(kv)
	kv[setName] = ok
	status, reason := corev1.ConditionTrue, "AllSidecarsetUpgradable"
	for _, v := range kv {
		if !v {
			status, reason = corev1.ConditionFalse, "UpdateImmutableField"
		}
	}
	if cond.Status == status && cond.Reason == reason && maps.Equal(before, kv) {
		return cond, false
	}
	b, _ := json.Marshal(kv)
	if cond.Status != status {
		cond.LastTransitionTime = now
	}
	cond.Status, cond.Reason, cond.Message = status, reason, string(b)
	return cond, true
}

// describe names pods for an event.
func describe(pods []*corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// containerSpec returns the pod's container of that name.
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// containerStatus returns the status of the pod's container of that name.
func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
