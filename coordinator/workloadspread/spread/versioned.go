package spread

import (
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
)

// A rolling update of a Deployment creates the new revision's pods while
// the old revision's still fill the subsets. Counted together, the new
// pods would find the first subsets full and all go to the last one, and
// once the old pods are gone the spread would be lost. So, as OpenKruise
// 1.6+ does for Deployments and ReplicaSets, the WorkloadSpread also
// keeps status.versionedSubsetStatuses: the same per-subset counts and
// records, kept per revision (the pods' pod-template-hash), and the
// webhook places a new pod by its own revision's counts. The flat
// subsetStatuses still count every pod, and carry the Schedulable
// conditions: those describe a subset, whatever the revision, so the
// versioned statuses have none. Other workloads keep no versioned
// statuses.

// Versioned reports whether ws keeps per-revision subset statuses: its
// target is an apps Deployment or ReplicaSet.
func Versioned(ws *v1alpha1.WorkloadSpread) bool {
	if ws.Spec.TargetReference == nil {
		return false
	}
	gk := Target(ws.Spec.TargetReference)
	return gk.Group == appsv1.GroupName && (gk.Kind == "Deployment" || gk.Kind == "ReplicaSet")
}

// PodVersion is the revision a pod of ws's workload counts in: its
// pod-template-hash label when ws keeps versioned statuses, "" (the flat
// statuses alone) otherwise or without the label.
func PodVersion(ws *v1alpha1.WorkloadSpread, pod *corev1.Pod) string {
	if !Versioned(ws) {
		return ""
	}
	return pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
}

// versionView is a copy of ws whose subsetStatuses are those of version
// (InitialStatus for a subset the revision has no entry for), each with
// the flat status's conditions, so that the flat-status functions
// (Choose, RecordCreate, RecordDelete) work on one revision's counts.
func versionView(ws *v1alpha1.WorkloadSpread, version string, replicas int32) *v1alpha1.WorkloadSpread {
	view := &v1alpha1.WorkloadSpread{ObjectMeta: ws.ObjectMeta, Spec: ws.Spec}
	for _, st := range ws.Status.VersionedSubsetStatuses[version] {
		view.Status.SubsetStatuses = append(view.Status.SubsetStatuses, *st.DeepCopy())
	}
	ensureStatuses(view, replicas)
	for i := range view.Status.SubsetStatuses {
		st := &view.Status.SubsetStatuses[i]
		st.Conditions = nil
		if flat := SubsetStatus(&ws.Status, st.Name); flat != nil {
			st.Conditions = slices.Clone(flat.Conditions)
		}
	}
	return view
}

// storeVersion writes the view's subset statuses, without conditions,
// as version's entry in ws.
func storeVersion(ws, view *v1alpha1.WorkloadSpread, version string) {
	sts := make([]v1alpha1.WorkloadSpreadSubsetStatus, len(view.Status.SubsetStatuses))
	for i, st := range view.Status.SubsetStatuses {
		st.Conditions = nil
		sts[i] = st
	}
	if ws.Status.VersionedSubsetStatuses == nil {
		ws.Status.VersionedSubsetStatuses = map[string][]v1alpha1.WorkloadSpreadSubsetStatus{}
	}
	ws.Status.VersionedSubsetStatuses[version] = sts
}

// RecordCreateVersion is RecordCreate for a pod of revision version: the
// subset is chosen by that revision's statuses (a revision without
// statuses yet starts from each subset's maxReplicas), the record goes
// there and into the flat status's subset too, so that subsetStatuses
// still count every pod. With version "" it is RecordCreate.
func RecordCreateVersion(ws *v1alpha1.WorkloadSpread, version, id string, replicas int32, now time.Time) (subset string, changed bool) {
	if version == "" {
		return RecordCreate(ws, id, replicas, now)
	}
	view := versionView(ws, version, replicas)
	subset, changed = RecordCreate(view, id, replicas, now)
	if !changed {
		return subset, false
	}
	storeVersion(ws, view, version)
	ensureStatuses(ws, replicas)
	if st := SubsetStatus(&ws.Status, subset); st != nil && st.MissingReplicas != Unlimited && Recorded(ws, id) == "" {
		addRecord(&st.CreatingPods, id, now)
		if st.MissingReplicas > 0 {
			st.MissingReplicas--
		}
	}
	return subset, true
}

// RecordDeleteVersion is RecordDelete for a pod of revision version: the
// record goes into the flat status and into that revision's statuses
// (a revision without statuses has none to correct: the controller
// writes them from the pods). With version "" it is RecordDelete.
func RecordDeleteVersion(ws *v1alpha1.WorkloadSpread, version, name, subset string, replicas int32, now time.Time) bool {
	changed := RecordDelete(ws, name, subset, now)
	if version == "" || len(ws.Status.VersionedSubsetStatuses[version]) == 0 {
		return changed
	}
	view := versionView(ws, version, replicas)
	if RecordDelete(view, name, subset, now) {
		storeVersion(ws, view, version)
		changed = true
	}
	return changed
}

// addRecord adds id at now to a creatingPods or deletingPods map.
func addRecord(m *map[string]metav1.Time, id string, now time.Time) {
	if *m == nil {
		*m = map[string]metav1.Time{}
	}
	(*m)[id] = metav1.NewTime(now)
}

// ByVersion splits each subset's pods by revision (PodVersion).
func ByVersion(ws *v1alpha1.WorkloadSpread, g Groups) map[string]map[string][]*corev1.Pod {
	out := map[string]map[string][]*corev1.Pod{}
	for subset, pods := range g.BySubset {
		for _, p := range pods {
			v := PodVersion(ws, p)
			if out[v] == nil {
				out[v] = map[string][]*corev1.Pod{}
			}
			out[v][subset] = append(out[v][subset], p)
		}
	}
	return out
}

// VersionedStatus computes status.versionedSubsetStatuses of a
// WorkloadSpread that keeps them (nil for one that does not): for each
// revision with pods, and each revision whose old statuses still hold
// records, the subsets' statuses from that revision's pods and records,
// as Status computes the flat ones (without conditions). A revision with
// neither pods nor records left is dropped. The records also sit in the
// flat statuses, whose Outcome reports their expiry; only the earliest
// recheck time is added to out.
func VersionedStatus(ws *v1alpha1.WorkloadSpread, g Groups, replicas int32, now time.Time, out *Outcome) (map[string][]v1alpha1.WorkloadSpreadSubsetStatus, error) {
	if !Versioned(ws) {
		return nil, nil
	}
	byVersion := ByVersion(ws, g)
	versions := map[string]bool{}
	for v := range byVersion {
		if v != "" {
			versions[v] = true
		}
	}
	for v := range ws.Status.VersionedSubsetStatuses {
		versions[v] = true
	}
	result := map[string][]v1alpha1.WorkloadSpreadSubsetStatus{}
	for _, v := range slices.Sorted(maps.Keys(versions)) {
		old := &v1alpha1.WorkloadSpreadStatus{SubsetStatuses: ws.Status.VersionedSubsetStatuses[v]}
		scratch := Outcome{}
		sts := make([]v1alpha1.WorkloadSpreadSubsetStatus, len(ws.Spec.Subsets))
		keep := len(byVersion[v]) > 0
		for i := range ws.Spec.Subsets {
			s := &ws.Spec.Subsets[i]
			st, err := subsetStatus(s, byVersion[v][s.Name], SubsetStatus(old, s.Name), replicas, now, &scratch)
			if err != nil {
				return nil, err
			}
			st.Conditions = nil
			keep = keep || len(st.CreatingPods) > 0 || len(st.DeletingPods) > 0
			sts[i] = st
		}
		if !keep {
			continue
		}
		result[v] = sts
		if !scratch.Recheck.IsZero() {
			soonest(&out.Recheck, scratch.Recheck)
		}
	}
	if len(result) == 0 {
		return nil, nil
	}
	return result, nil
}

// LatestVersion is the revision of a Deployment's newest ReplicaSet: the
// pod-template-hash of the one, among rss (those the Deployment
// controls), with the highest deployment.kubernetes.io/revision; "" when
// none has one.
func LatestVersion(rss []*appsv1.ReplicaSet) string {
	var latest string
	best := int64(-1)
	for _, rs := range rss {
		rev, err := strconv.ParseInt(rs.Annotations[deploymentRevisionAnnotation], 10, 64)
		if err != nil || rev <= best {
			continue
		}
		if h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" {
			best, latest = rev, h
		}
	}
	return latest
}

// deploymentRevisionAnnotation records a Deployment's ReplicaSet's place
// in its rollout history.
const deploymentRevisionAnnotation = "deployment.kubernetes.io/revision"
