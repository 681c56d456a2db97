package conversion

import (
	"encoding/json"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// ContainerRecreateRequest: spec, labels, finalizers and the rest of the
// status are the same in both versions (preStop's type is renamed
// CRRProbeHandler). Two v1alpha1 annotations became v1beta1 status fields:
//
//   - crr.apps.kruise.io/sync-container-statuses (a JSON list) is
//     status.containerStatusSnapshot. v1beta1 -> v1alpha1 writes the list
//     as compact JSON, and no annotation for an empty list. v1alpha1 ->
//     v1beta1 fills the field from the annotation when it parses. An
//     annotation that does not parse, or that parses but is not what the
//     field would be written back as (spacing, unknown keys, "[]", "null"),
//     is stashed as it is and written back unchanged as long as the field
//     still holds what it parsed to (nothing, if it did not parse); once a
//     v1beta1 writer changes the field, the field wins.
//
//   - crr.apps.kruise.io/unready-acquired (an RFC 3339 time) is the
//     PreRecreateGrace condition with status True and lastTransitionTime
//     that time. v1beta1 -> v1alpha1 writes the annotation (UTC, whole
//     seconds) from the first PreRecreateGrace condition when its status is
//     True, and none otherwise. v1alpha1 -> v1beta1 turns an annotation
//     that parses into the condition {type PreRecreateGrace, status True,
//     reason PreRecreateGrace, lastTransitionTime the time, message below}.
//     The v1beta1 conditions are stashed whole when they are not exactly
//     what the annotation alone gives back; they are restored as they are
//     when the annotation still names the same second (or is still absent or
//     unparsable, if the conditions gave none), and otherwise the stashed
//     conditions are kept with their PreRecreateGrace entries replaced by
//     the one the annotation gives. The annotation's own text is stashed
//     when it does not parse or is not in the canonical form (other zone,
//     fractions of a second), and written back while the condition still
//     gives the same second (an unparsable one: while no condition gives
//     one).
//
// The same two annotations set directly on a v1beta1 object, where they
// mean nothing, are stashed and restored as they are.

func init() {
	register("ContainerRecreateRequest", containerRecreateRequestToV1beta1, containerRecreateRequestToV1alpha1)
}

// crrPreRecreateGraceMessage is the message of the PreRecreateGrace
// condition made from the v1alpha1 annotation.
const crrPreRecreateGraceMessage = "The pod was made not ready for the unready grace period before its containers are recreated."

// crrAlphaFields are the v1alpha1 annotation texts that the v1beta1 fields
// cannot give back exactly, stashed on the v1beta1 object.
type crrAlphaFields struct {
	// SyncContainerStatuses is the crr.apps.kruise.io/sync-container-statuses
	// annotation as written.
	SyncContainerStatuses *string `json:"syncContainerStatuses,omitempty"`
	// UnreadyAcquired is the crr.apps.kruise.io/unready-acquired annotation
	// as written.
	UnreadyAcquired *string `json:"unreadyAcquired,omitempty"`
}

// crrBetaFields are the v1beta1 values that v1alpha1 cannot hold, stashed
// on the v1alpha1 object.
type crrBetaFields struct {
	// Conditions is status.conditions, when the unready-acquired annotation
	// alone does not give it back.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// SyncContainerStatuses is a crr.apps.kruise.io/sync-container-statuses
	// annotation set on the v1beta1 object itself.
	SyncContainerStatuses *string `json:"syncContainerStatuses,omitempty"`
	// UnreadyAcquired is a crr.apps.kruise.io/unready-acquired annotation
	// set on the v1beta1 object itself.
	UnreadyAcquired *string `json:"unreadyAcquired,omitempty"`
}

// containerRecreateRequestToV1beta1 converts a v1alpha1
// ContainerRecreateRequest to v1beta1.
func containerRecreateRequestToV1beta1(in *v1alpha1.ContainerRecreateRequest, out *v1beta1.ContainerRecreateRequest) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var beta crrBetaFields
	if _, err := Unstash(&out.ObjectMeta, "v1beta1", &beta); err != nil {
		return err
	}
	var alpha crrAlphaFields
	out.Spec = crrSpecToV1beta1(&in.Spec)
	out.Status = crrStatusToV1beta1(&in.Status)

	// The legacy annotations leave the metadata: they become fields here.
	syncRaw, hasSync := out.Annotations[wellknown.AnnotationCRRSyncContainerStatuses]
	unreadyRaw, hasUnready := out.Annotations[wellknown.AnnotationCRRUnreadyAcquired]
	delete(out.Annotations, wellknown.AnnotationCRRSyncContainerStatuses)
	delete(out.Annotations, wellknown.AnnotationCRRUnreadyAcquired)

	if hasSync {
		snapshot, err := parseCRRSyncStatuses(syncRaw)
		if err == nil {
			out.Status.ContainerStatusSnapshot = snapshot
		}
		if back, ok, _ := formatCRRSyncStatuses(out.Status.ContainerStatusSnapshot); err != nil || !ok || back != syncRaw {
			alpha.SyncContainerStatuses = &syncRaw
		}
	}

	unreadyAt, unreadyOK := parseCRRUnreadyAcquired(unreadyRaw, hasUnready)
	if hasUnready && (!unreadyOK || formatCRRUnreadyAcquired(unreadyAt) != unreadyRaw) {
		alpha.UnreadyAcquired = &unreadyRaw
	}
	switch {
	case beta.Conditions == nil:
		out.Status.Conditions = crrConditionsFromAnnotation(nil, unreadyAt, unreadyOK)
	case crrUnreadyMatches(beta.Conditions, unreadyAt, unreadyOK):
		out.Status.Conditions = beta.Conditions
	default:
		// A v1alpha1 writer changed the annotation since the conditions
		// were stashed: the annotation wins for PreRecreateGrace.
		out.Status.Conditions = crrConditionsFromAnnotation(beta.Conditions, unreadyAt, unreadyOK)
	}

	// Annotations the v1beta1 object itself carried go back as they were.
	crrRestoreAnnotation(&out.ObjectMeta, wellknown.AnnotationCRRSyncContainerStatuses, beta.SyncContainerStatuses)
	crrRestoreAnnotation(&out.ObjectMeta, wellknown.AnnotationCRRUnreadyAcquired, beta.UnreadyAcquired)
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return Stash(&out.ObjectMeta, "v1alpha1", &alpha)
}

// containerRecreateRequestToV1alpha1 converts a v1beta1
// ContainerRecreateRequest to v1alpha1.
func containerRecreateRequestToV1alpha1(in *v1beta1.ContainerRecreateRequest, out *v1alpha1.ContainerRecreateRequest) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var alpha crrAlphaFields
	if _, err := Unstash(&out.ObjectMeta, "v1alpha1", &alpha); err != nil {
		return err
	}
	var beta crrBetaFields
	out.Spec = crrSpecToV1alpha1(&in.Spec)
	out.Status = crrStatusToV1alpha1(&in.Status)

	// The v1beta1 object's own copies of the legacy annotations are kept
	// aside: the names now carry the fields.
	if v, ok := out.Annotations[wellknown.AnnotationCRRSyncContainerStatuses]; ok {
		beta.SyncContainerStatuses = &v
		delete(out.Annotations, wellknown.AnnotationCRRSyncContainerStatuses)
	}
	if v, ok := out.Annotations[wellknown.AnnotationCRRUnreadyAcquired]; ok {
		beta.UnreadyAcquired = &v
		delete(out.Annotations, wellknown.AnnotationCRRUnreadyAcquired)
	}

	// status.containerStatusSnapshot -> sync-container-statuses.
	sync, hasSync, err := formatCRRSyncStatuses(in.Status.ContainerStatusSnapshot)
	if err != nil {
		return fmt.Errorf("status.containerStatusSnapshot: %w", err)
	}
	if raw := alpha.SyncContainerStatuses; raw != nil {
		parsed, perr := parseCRRSyncStatuses(*raw)
		if perr != nil {
			parsed = nil
		}
		if apiequality.Semantic.DeepEqual(parsed, in.Status.ContainerStatusSnapshot) {
			sync, hasSync = *raw, true
		}
	}
	if hasSync {
		crrSetAnnotation(&out.ObjectMeta, wellknown.AnnotationCRRSyncContainerStatuses, sync)
	}

	// PreRecreateGrace -> unready-acquired.
	at, hasAt := crrUnreadyFromConditions(in.Status.Conditions)
	unready, hasUnready := "", false
	if hasAt {
		unready, hasUnready = formatCRRUnreadyAcquired(at), true
	}
	if raw := alpha.UnreadyAcquired; raw != nil {
		rawAt, rawOK := parseCRRUnreadyAcquired(*raw, true)
		if rawOK == hasAt && (!rawOK || formatCRRUnreadyAcquired(rawAt) == unready) {
			unready, hasUnready = *raw, true
		}
	}
	if hasUnready {
		crrSetAnnotation(&out.ObjectMeta, wellknown.AnnotationCRRUnreadyAcquired, unready)
	}
	if !apiequality.Semantic.DeepEqual(in.Status.Conditions, crrConditionsFromAnnotation(nil, at, hasAt)) {
		// Never empty: no conditions are what no annotation gives.
		beta.Conditions = in.Status.Conditions
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return Stash(&out.ObjectMeta, "v1beta1", &beta)
}

// crrSpecToV1beta1 converts the spec, which only renames preStop's type.
func crrSpecToV1beta1(in *v1alpha1.ContainerRecreateRequestSpec) v1beta1.ContainerRecreateRequestSpec {
	out := v1beta1.ContainerRecreateRequestSpec{
		PodName:                 in.PodName,
		ActiveDeadlineSeconds:   in.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: in.TTLSecondsAfterFinished,
	}
	if in.Containers != nil {
		out.Containers = make([]v1beta1.ContainerRecreateRequestContainer, len(in.Containers))
		for i, c := range in.Containers {
			o := v1beta1.ContainerRecreateRequestContainer{Name: c.Name, Ports: c.Ports}
			if p := c.PreStop; p != nil {
				o.PreStop = &v1beta1.CRRProbeHandler{Exec: p.Exec, HTTPGet: p.HTTPGet, TCPSocket: p.TCPSocket}
			}
			if s := c.StatusContext; s != nil {
				o.StatusContext = &v1beta1.ContainerRecreateRequestContainerContext{ContainerID: s.ContainerID, RestartCount: s.RestartCount}
			}
			out.Containers[i] = o
		}
	}
	if s := in.Strategy; s != nil {
		out.Strategy = &v1beta1.ContainerRecreateRequestStrategy{
			FailurePolicy:                 v1beta1.ContainerRecreateRequestFailurePolicyType(s.FailurePolicy),
			OrderedRecreate:               s.OrderedRecreate,
			ForceRecreate:                 s.ForceRecreate,
			TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds,
			UnreadyGracePeriodSeconds:     s.UnreadyGracePeriodSeconds,
			MinStartedSeconds:             s.MinStartedSeconds,
		}
	}
	return out
}

// crrSpecToV1alpha1 converts the spec back.
func crrSpecToV1alpha1(in *v1beta1.ContainerRecreateRequestSpec) v1alpha1.ContainerRecreateRequestSpec {
	out := v1alpha1.ContainerRecreateRequestSpec{
		PodName:                 in.PodName,
		ActiveDeadlineSeconds:   in.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: in.TTLSecondsAfterFinished,
	}
	if in.Containers != nil {
		out.Containers = make([]v1alpha1.ContainerRecreateRequestContainer, len(in.Containers))
		for i, c := range in.Containers {
			o := v1alpha1.ContainerRecreateRequestContainer{Name: c.Name, Ports: c.Ports}
			if p := c.PreStop; p != nil {
				o.PreStop = &v1alpha1.ProbeHandler{Exec: p.Exec, HTTPGet: p.HTTPGet, TCPSocket: p.TCPSocket}
			}
			if s := c.StatusContext; s != nil {
				o.StatusContext = &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: s.ContainerID, RestartCount: s.RestartCount}
			}
			out.Containers[i] = o
		}
	}
	if s := in.Strategy; s != nil {
		out.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{
			FailurePolicy:                 v1alpha1.ContainerRecreateRequestFailurePolicyType(s.FailurePolicy),
			OrderedRecreate:               s.OrderedRecreate,
			ForceRecreate:                 s.ForceRecreate,
			TerminationGracePeriodSeconds: s.TerminationGracePeriodSeconds,
			UnreadyGracePeriodSeconds:     s.UnreadyGracePeriodSeconds,
			MinStartedSeconds:             s.MinStartedSeconds,
		}
	}
	return out
}

// crrStatusToV1beta1 converts the status fields both versions have.
func crrStatusToV1beta1(in *v1alpha1.ContainerRecreateRequestStatus) v1beta1.ContainerRecreateRequestStatus {
	out := v1beta1.ContainerRecreateRequestStatus{
		Phase:          v1beta1.ContainerRecreateRequestPhase(in.Phase),
		CompletionTime: in.CompletionTime,
		Message:        in.Message,
	}
	if in.ContainerRecreateStates != nil {
		out.ContainerRecreateStates = make([]v1beta1.ContainerRecreateRequestContainerRecreateState, len(in.ContainerRecreateStates))
		for i, s := range in.ContainerRecreateStates {
			out.ContainerRecreateStates[i] = v1beta1.ContainerRecreateRequestContainerRecreateState{
				Name:     s.Name,
				Phase:    v1beta1.ContainerRecreateRequestPhase(s.Phase),
				Message:  s.Message,
				IsKilled: s.IsKilled,
			}
		}
	}
	return out
}

// crrStatusToV1alpha1 converts the status fields both versions have.
func crrStatusToV1alpha1(in *v1beta1.ContainerRecreateRequestStatus) v1alpha1.ContainerRecreateRequestStatus {
	out := v1alpha1.ContainerRecreateRequestStatus{
		Phase:          v1alpha1.ContainerRecreateRequestPhase(in.Phase),
		CompletionTime: in.CompletionTime,
		Message:        in.Message,
	}
	if in.ContainerRecreateStates != nil {
		out.ContainerRecreateStates = make([]v1alpha1.ContainerRecreateRequestContainerRecreateState, len(in.ContainerRecreateStates))
		for i, s := range in.ContainerRecreateStates {
			out.ContainerRecreateStates[i] = v1alpha1.ContainerRecreateRequestContainerRecreateState{
				Name:     s.Name,
				Phase:    v1alpha1.ContainerRecreateRequestPhase(s.Phase),
				Message:  s.Message,
				IsKilled: s.IsKilled,
			}
		}
	}
	return out
}

// parseCRRSyncStatuses reads the sync-container-statuses annotation into
// the v1beta1 snapshot (nil for an empty list).
func parseCRRSyncStatuses(raw string) ([]v1beta1.ContainerRecreateRequestSyncContainerStatus, error) {
	var list []v1alpha1.ContainerRecreateRequestSyncContainerStatus
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]v1beta1.ContainerRecreateRequestSyncContainerStatus, len(list))
	for i, s := range list {
		out[i] = v1beta1.ContainerRecreateRequestSyncContainerStatus{
			Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount, ContainerID: s.ContainerID,
		}
	}
	return out, nil
}

// formatCRRSyncStatuses writes the snapshot as the sync-container-statuses
// annotation; ok is false for an empty snapshot, which has no annotation.
func formatCRRSyncStatuses(snapshot []v1beta1.ContainerRecreateRequestSyncContainerStatus) (string, bool, error) {
	if len(snapshot) == 0 {
		return "", false, nil
	}
	list := make([]v1alpha1.ContainerRecreateRequestSyncContainerStatus, len(snapshot))
	for i, s := range snapshot {
		list[i] = v1alpha1.ContainerRecreateRequestSyncContainerStatus{
			Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount, ContainerID: s.ContainerID,
		}
	}
	raw, err := json.Marshal(list)
	if err != nil {
		return "", false, err
	}
	return string(raw), true, nil
}

// parseCRRUnreadyAcquired reads the unready-acquired annotation, if
// present, as a time truncated to whole seconds (what a condition's
// lastTransitionTime holds).
func parseCRRUnreadyAcquired(raw string, present bool) (time.Time, bool) {
	if !present {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC().Truncate(time.Second), true
}

// formatCRRUnreadyAcquired writes t in the annotation's canonical form, as
// the controller writes it: RFC 3339, UTC, whole seconds.
func formatCRRUnreadyAcquired(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// crrUnreadyFromConditions is the unready time that conditions give to
// v1alpha1: the lastTransitionTime of the first PreRecreateGrace
// condition, if its status is True.
func crrUnreadyFromConditions(conditions []metav1.Condition) (time.Time, bool) {
	for _, c := range conditions {
		if c.Type == v1beta1.ContainerRecreateRequestPreRecreateGraceType {
			if c.Status != metav1.ConditionTrue {
				return time.Time{}, false
			}
			return c.LastTransitionTime.UTC().Truncate(time.Second), true
		}
	}
	return time.Time{}, false
}

// crrUnreadyMatches reports whether conditions give the unready time that
// the annotation holds (or both give none).
func crrUnreadyMatches(conditions []metav1.Condition, at time.Time, ok bool) bool {
	got, gotOK := crrUnreadyFromConditions(conditions)
	return gotOK == ok && (!ok || got.Equal(at))
}

// crrConditionsFromAnnotation returns base without its PreRecreateGrace
// conditions, followed by the True PreRecreateGrace condition for the
// unready time at, if ok. It returns nil rather than an empty list.
func crrConditionsFromAnnotation(base []metav1.Condition, at time.Time, ok bool) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range base {
		if c.Type != v1beta1.ContainerRecreateRequestPreRecreateGraceType {
			out = append(out, c)
		}
	}
	if ok {
		out = append(out, metav1.Condition{
			Type:               v1beta1.ContainerRecreateRequestPreRecreateGraceType,
			Status:             metav1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(at),
			Reason:             v1beta1.ContainerRecreateRequestPreRecreateGraceReason,
			Message:            crrPreRecreateGraceMessage,
		})
	}
	return out
}

// crrSetAnnotation sets one annotation on meta.
func crrSetAnnotation(meta *metav1.ObjectMeta, key, value string) {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = value
}

// crrRestoreAnnotation sets key to *value when value is not nil.
func crrRestoreAnnotation(meta *metav1.ObjectMeta, key string, value *string) {
	if value != nil {
		crrSetAnnotation(meta, key, *value)
	}
}
