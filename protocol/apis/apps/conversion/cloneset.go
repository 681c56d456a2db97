package conversion

import (
	"regexp"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// CloneSet: how the two versions differ and how each difference converts.
//
//   - v1alpha1 spec.updateStrategy holds the rolling-update settings and a
//     type (ReCreate, InPlaceIfPossible, InPlaceOnly); v1beta1 moves the
//     settings to spec.updateStrategy.rollingUpdate, the type to
//     rollingUpdate.podUpdatePolicy, and has its own type, RollingUpdate
//     (set when the v1alpha1 type is) or OnDelete. OnDelete has no v1alpha1
//     form: it converts to paused: true, the v1alpha1 setting closest to it
//     (running pods are left alone), and is stashed; it comes back while the
//     v1alpha1 object is still paused.
//   - v1alpha1 scaleStrategy.disablePVCReuse is the inverse of v1beta1
//     scaleStrategy.enablePVCReuse.
//   - v1beta1 scaleStrategy.excludePreparingDelete is, in v1alpha1, the
//     label apps.kruise.io/cloneset-scaling-exclude-preparing-delete: "true"
//     (converted into the field and removed from the v1beta1 labels; any
//     other value of the label stays a label).
//   - The image pre-download settings (see csPreDownloadSettings) are
//     annotations in v1alpha1 and inPlaceUpdateStrategy fields in v1beta1.
//
// The remaining ambiguities are recorded in the stash structs below, so
// both round trips give back the object they started from.

func init() { register("CloneSet", cloneSetToV1beta1, cloneSetToV1alpha1) }

// cloneSetAlphaFields is what a v1beta1 CloneSet keeps of its v1alpha1
// source that the v1beta1 form would otherwise decide differently.
type cloneSetAlphaFields struct {
	// PreDownloadInSpec names (by annotation key) the pre-download settings
	// that v1alpha1 set as inPlaceUpdateStrategy fields, with no annotation,
	// though the value would fit the annotation: they stay fields on the way
	// back.
	PreDownloadInSpec []string `json:"preDownloadInSpec,omitempty"`
	// EmptyInPlaceUpdateStrategy records that v1alpha1 had an empty (not
	// absent) inPlaceUpdateStrategy, which received fields converted from
	// annotations.
	EmptyInPlaceUpdateStrategy *bool `json:"emptyInPlaceUpdateStrategy,omitempty"`
}

// cloneSetBetaFields is what a v1alpha1 CloneSet keeps of its v1beta1
// source that v1alpha1 cannot say.
type cloneSetBetaFields struct {
	// UpdateStrategyType is spec.updateStrategy.type when it is OnDelete or
	// differs from what the v1alpha1 type gives back (RollingUpdate when the
	// v1alpha1 type is set, empty when not).
	UpdateStrategyType *v1beta1.CloneSetUpdateStrategyType `json:"updateStrategyType,omitempty"`
	// Paused is rollingUpdate.paused when OnDelete turned it to true.
	Paused *bool `json:"paused,omitempty"`
	// EmptyRollingUpdate records an empty (not absent) rollingUpdate.
	EmptyRollingUpdate *bool `json:"emptyRollingUpdate,omitempty"`
	// ExcludePreparingDeleteLabel is the v1beta1 object's own value of the
	// label that v1alpha1 uses for scaleStrategy.excludePreparingDelete,
	// where the field overrode it.
	ExcludePreparingDeleteLabel *string `json:"excludePreparingDeleteLabel,omitempty"`
	// RawPreDownloadAnnotations names the pre-download annotations that the
	// v1beta1 object carried as annotations, with the field unset, though
	// they would convert to the field: they stay annotations on the way
	// back.
	RawPreDownloadAnnotations []string `json:"rawPreDownloadAnnotations,omitempty"`
}

// cloneSetToV1beta1 converts a v1alpha1 CloneSet to v1beta1.
func cloneSetToV1beta1(in *v1alpha1.CloneSet, out *v1beta1.CloneSet) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var restore cloneSetBetaFields
	if _, err := Unstash(&out.ObjectMeta, "v1beta1", &restore); err != nil {
		return err
	}
	keep := cloneSetSpecToV1beta1(&out.ObjectMeta, &in.Spec, &out.Spec, &restore)
	out.Status = cloneSetStatusToV1beta1(&in.Status)
	return Stash(&out.ObjectMeta, "v1alpha1", &keep)
}

// cloneSetToV1alpha1 converts a v1beta1 CloneSet to v1alpha1.
func cloneSetToV1alpha1(in *v1beta1.CloneSet, out *v1alpha1.CloneSet) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var restore cloneSetAlphaFields
	if _, err := Unstash(&out.ObjectMeta, "v1alpha1", &restore); err != nil {
		return err
	}
	keep := cloneSetSpecToV1alpha1(&out.ObjectMeta, &in.Spec, &out.Spec, &restore)
	out.Status = cloneSetStatusToV1alpha1(&in.Status)
	return Stash(&out.ObjectMeta, "v1beta1", &keep)
}

// cloneSetSpecToV1beta1 converts a v1alpha1 spec; meta is the converted
// object's own metadata (a copy, which it edits: the label and annotations
// that become fields) and restore what an earlier conversion from v1beta1
// stashed. It returns what to stash for the way back. UnitedDeployment uses
// it for its CloneSet template.
func cloneSetSpecToV1beta1(meta *metav1.ObjectMeta, in *v1alpha1.CloneSetSpec, out *v1beta1.CloneSetSpec, restore *cloneSetBetaFields) cloneSetAlphaFields {
	var keep cloneSetAlphaFields
	*out = v1beta1.CloneSetSpec{
		Replicas:             in.Replicas,
		Selector:             in.Selector,
		Template:             in.Template,
		VolumeClaimTemplates: in.VolumeClaimTemplates,
		ScaleStrategy: v1beta1.CloneSetScaleStrategy{
			PodsToDelete:   in.ScaleStrategy.PodsToDelete,
			MaxUnavailable: in.ScaleStrategy.MaxUnavailable,
			EnablePVCReuse: !in.ScaleStrategy.DisablePVCReuse,
		},
		RevisionHistoryLimit:    in.RevisionHistoryLimit,
		MinReadySeconds:         in.MinReadySeconds,
		Lifecycle:               in.Lifecycle,
		ProgressDeadlineSeconds: in.ProgressDeadlineSeconds,
	}

	// The exclude-preparing-delete label "true" becomes the field.
	key := wellknown.LabelCloneSetScalingExcludePreparingDelete
	if v, ok := meta.Labels[key]; ok && v == "true" {
		out.ScaleStrategy.ExcludePreparingDelete = true
		delete(meta.Labels, key)
	}
	if restore.ExcludePreparingDeleteLabel != nil {
		meta.Labels = csSetKey(meta.Labels, key, *restore.ExcludePreparingDeleteLabel)
	}
	meta.Labels = csNilIfEmpty(meta.Labels)

	us := &in.UpdateStrategy
	ius, inSpec, emptyIUS := csPreDownloadToV1beta1(meta, us.InPlaceUpdateStrategy, restore.RawPreDownloadAnnotations)
	keep.PreDownloadInSpec = inSpec
	if emptyIUS {
		keep.EmptyInPlaceUpdateStrategy = csPtr(true)
	}
	ru := v1beta1.RollingUpdateCloneSetStrategy{
		Partition:             us.Partition,
		MaxUnavailable:        us.MaxUnavailable,
		MaxSurge:              us.MaxSurge,
		PodUpdatePolicy:       v1beta1.CloneSetPodUpdateStrategyType(us.Type),
		Paused:                us.Paused,
		PriorityStrategy:      us.PriorityStrategy,
		ScatterStrategy:       us.ScatterStrategy,
		InPlaceUpdateStrategy: ius,
	}
	typ := csDerivedUpdateType(ru.PodUpdatePolicy)
	if t := restore.UpdateStrategyType; t != nil {
		switch {
		case *t != v1beta1.OnDeleteCloneSetUpdateStrategyType:
			typ = *t
		case us.Paused:
			// Still paused as OnDelete left it: OnDelete it is again.
			typ = *t
			if restore.Paused != nil {
				ru.Paused = *restore.Paused
			}
		}
	}
	out.UpdateStrategy.Type = typ
	if !csRollingUpdateIsZero(&ru) || (restore.EmptyRollingUpdate != nil && *restore.EmptyRollingUpdate) {
		out.UpdateStrategy.RollingUpdate = &ru
	}
	return keep
}

// cloneSetSpecToV1alpha1 is the reverse of cloneSetSpecToV1beta1.
func cloneSetSpecToV1alpha1(meta *metav1.ObjectMeta, in *v1beta1.CloneSetSpec, out *v1alpha1.CloneSetSpec, restore *cloneSetAlphaFields) cloneSetBetaFields {
	var keep cloneSetBetaFields
	*out = v1alpha1.CloneSetSpec{
		Replicas:             in.Replicas,
		Selector:             in.Selector,
		Template:             in.Template,
		VolumeClaimTemplates: in.VolumeClaimTemplates,
		ScaleStrategy: v1alpha1.CloneSetScaleStrategy{
			PodsToDelete:    in.ScaleStrategy.PodsToDelete,
			MaxUnavailable:  in.ScaleStrategy.MaxUnavailable,
			DisablePVCReuse: !in.ScaleStrategy.EnablePVCReuse,
		},
		RevisionHistoryLimit:    in.RevisionHistoryLimit,
		MinReadySeconds:         in.MinReadySeconds,
		Lifecycle:               in.Lifecycle,
		ProgressDeadlineSeconds: in.ProgressDeadlineSeconds,
	}

	// excludePreparingDelete becomes the label "true"; a label of the
	// v1beta1 object's own that the field overrides is stashed.
	key := wellknown.LabelCloneSetScalingExcludePreparingDelete
	v, labelled := meta.Labels[key]
	switch {
	case in.ScaleStrategy.ExcludePreparingDelete:
		if labelled {
			keep.ExcludePreparingDeleteLabel = csPtr(v)
		}
		meta.Labels = csSetKey(meta.Labels, key, "true")
	case labelled && v == "true":
		keep.ExcludePreparingDeleteLabel = csPtr(v)
		delete(meta.Labels, key)
		meta.Labels = csNilIfEmpty(meta.Labels)
	}

	var ru v1beta1.RollingUpdateCloneSetStrategy
	if in.UpdateStrategy.RollingUpdate != nil {
		ru = *in.UpdateStrategy.RollingUpdate
		if csRollingUpdateIsZero(&ru) {
			keep.EmptyRollingUpdate = csPtr(true)
		}
	}
	emptyIUS := restore.EmptyInPlaceUpdateStrategy != nil && *restore.EmptyInPlaceUpdateStrategy
	ius, raw := csPreDownloadToV1alpha1(meta, ru.InPlaceUpdateStrategy, restore.PreDownloadInSpec, emptyIUS)
	keep.RawPreDownloadAnnotations = raw
	out.UpdateStrategy = v1alpha1.CloneSetUpdateStrategy{
		Type:                  v1alpha1.CloneSetUpdateStrategyType(ru.PodUpdatePolicy),
		Partition:             ru.Partition,
		MaxUnavailable:        ru.MaxUnavailable,
		MaxSurge:              ru.MaxSurge,
		Paused:                ru.Paused,
		PriorityStrategy:      ru.PriorityStrategy,
		ScatterStrategy:       ru.ScatterStrategy,
		InPlaceUpdateStrategy: ius,
	}
	switch typ := in.UpdateStrategy.Type; {
	case typ == v1beta1.OnDeleteCloneSetUpdateStrategyType:
		keep.UpdateStrategyType = csPtr(typ)
		if !ru.Paused {
			keep.Paused = csPtr(false)
		}
		out.UpdateStrategy.Paused = true
	case typ != csDerivedUpdateType(ru.PodUpdatePolicy):
		keep.UpdateStrategyType = csPtr(typ)
	}
	return keep
}

// csDerivedUpdateType is the v1beta1 update strategy type that goes
// with a pod update policy converted from v1alpha1: RollingUpdate when the
// v1alpha1 type was set, empty (the default) when not.
func csDerivedUpdateType(policy v1beta1.CloneSetPodUpdateStrategyType) v1beta1.CloneSetUpdateStrategyType {
	if policy == "" {
		return ""
	}
	return v1beta1.RollingUpdateCloneSetUpdateStrategyType
}

// csRollingUpdateIsZero reports whether a rollingUpdate sets nothing; such a
// rollingUpdate converted from v1alpha1 is left out.
func csRollingUpdateIsZero(ru *v1beta1.RollingUpdateCloneSetStrategy) bool {
	return ru.Partition == nil && ru.MaxUnavailable == nil && ru.MaxSurge == nil &&
		ru.PodUpdatePolicy == "" && !ru.Paused && ru.PriorityStrategy == nil &&
		len(ru.ScatterStrategy) == 0 && ru.InPlaceUpdateStrategy == nil
}

// cloneSetStatusToV1beta1 converts a v1alpha1 status (the same fields).
func cloneSetStatusToV1beta1(in *v1alpha1.CloneSetStatus) v1beta1.CloneSetStatus {
	out := v1beta1.CloneSetStatus{
		ObservedGeneration:       in.ObservedGeneration,
		Replicas:                 in.Replicas,
		ReadyReplicas:            in.ReadyReplicas,
		AvailableReplicas:        in.AvailableReplicas,
		UpdatedReplicas:          in.UpdatedReplicas,
		UpdatedReadyReplicas:     in.UpdatedReadyReplicas,
		UpdatedAvailableReplicas: in.UpdatedAvailableReplicas,
		ExpectedUpdatedReplicas:  in.ExpectedUpdatedReplicas,
		UpdateRevision:           in.UpdateRevision,
		CurrentRevision:          in.CurrentRevision,
		CollisionCount:           in.CollisionCount,
		LabelSelector:            in.LabelSelector,
	}
	if in.Conditions != nil {
		out.Conditions = make([]v1beta1.CloneSetCondition, len(in.Conditions))
		for i, c := range in.Conditions {
			out.Conditions[i] = v1beta1.CloneSetCondition{
				Type:               v1beta1.CloneSetConditionType(c.Type),
				Status:             c.Status,
				LastUpdateTime:     c.LastUpdateTime,
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}
	return out
}

// cloneSetStatusToV1alpha1 converts a v1beta1 status (the same fields).
func cloneSetStatusToV1alpha1(in *v1beta1.CloneSetStatus) v1alpha1.CloneSetStatus {
	out := v1alpha1.CloneSetStatus{
		ObservedGeneration:       in.ObservedGeneration,
		Replicas:                 in.Replicas,
		ReadyReplicas:            in.ReadyReplicas,
		AvailableReplicas:        in.AvailableReplicas,
		UpdatedReplicas:          in.UpdatedReplicas,
		UpdatedReadyReplicas:     in.UpdatedReadyReplicas,
		UpdatedAvailableReplicas: in.UpdatedAvailableReplicas,
		ExpectedUpdatedReplicas:  in.ExpectedUpdatedReplicas,
		UpdateRevision:           in.UpdateRevision,
		CurrentRevision:          in.CurrentRevision,
		CollisionCount:           in.CollisionCount,
		LabelSelector:            in.LabelSelector,
	}
	if in.Conditions != nil {
		out.Conditions = make([]v1alpha1.CloneSetCondition, len(in.Conditions))
		for i, c := range in.Conditions {
			out.Conditions[i] = v1alpha1.CloneSetCondition{
				Type:               v1alpha1.CloneSetConditionType(c.Type),
				Status:             c.Status,
				LastUpdateTime:     c.LastUpdateTime,
				LastTransitionTime: c.LastTransitionTime,
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}
	return out
}

// Image pre-download settings.
//
// v1alpha1 sets them with annotations, v1beta1 with fields of
// rollingUpdate.inPlaceUpdateStrategy (the shared pub type, so a v1alpha1
// object can set the fields too). The rule, per setting:
//
//   - v1alpha1 -> v1beta1: a field that is set is kept, and so is the
//     annotation if there is one. Otherwise an annotation whose value is
//     the exact text form of a valid field value (parallelism: "3" or
//     "25%"; timeout: an integer of at least 1; min updated ready pods: an
//     integer of at least 0; no sign, no leading zeros) becomes the field
//     and leaves the annotations. Any other annotation value stays an
//     annotation.
//   - v1beta1 -> v1alpha1: a field that is set, with no annotation, and
//     whose value has such a text form becomes the annotation. Otherwise
//     field and annotation are kept as they are.
//
// Where a round trip would not give back the object (a v1alpha1 field
// with no annotation, a v1beta1 annotation with no field, an empty
// inPlaceUpdateStrategy), the stash structs above record it.

// csPreDownloadSetting is one image pre-download setting.
type csPreDownloadSetting struct {
	// annotation is the v1alpha1 annotation key.
	annotation string
	// isSet reports whether the field is set in s (which may be nil).
	isSet func(s *pub.InPlaceUpdateStrategy) bool
	// format returns the field's annotation text and whether that text
	// converts back to exactly the field (the field must be set).
	format func(s *pub.InPlaceUpdateStrategy) (string, bool)
	// parse sets the field in s from an annotation value when the value is
	// the exact text form of a valid field value, and reports whether it
	// did. A nil s only checks.
	parse func(v string, s *pub.InPlaceUpdateStrategy) bool
	// clear unsets the field in s.
	clear func(s *pub.InPlaceUpdateStrategy)
}

// csPercentRE is the percentage form the fields' schema admits.
var csPercentRE = regexp.MustCompile(`^0*(100|[1-9]?[0-9])%$`)

// csParseParallelism parses the parallelism annotation: a non-negative
// integer or a percentage, in the exact text form the field prints.
func csParseParallelism(v string) (intstr.IntOrString, bool) {
	p := intstr.Parse(v)
	if p.String() != v {
		return p, false
	}
	if p.Type == intstr.Int {
		return p, p.IntVal >= 0
	}
	return p, csPercentRE.MatchString(p.StrVal)
}

// csParseInt32 parses an integer annotation of at least min, in its exact
// decimal text form.
func csParseInt32(v string, minimum int32) (int32, bool) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || strconv.FormatInt(n, 10) != v || int32(n) < minimum {
		return 0, false
	}
	return int32(n), true
}

// csInt32Setting is a pre-download setting held in an *int32 field of at
// least minimum.
func csInt32Setting(annotation string, minimum int32, field func(s *pub.InPlaceUpdateStrategy) **int32) csPreDownloadSetting {
	return csPreDownloadSetting{
		annotation: annotation,
		isSet:      func(s *pub.InPlaceUpdateStrategy) bool { return s != nil && *field(s) != nil },
		format: func(s *pub.InPlaceUpdateStrategy) (string, bool) {
			n := **field(s)
			return strconv.FormatInt(int64(n), 10), n >= minimum
		},
		parse: func(v string, s *pub.InPlaceUpdateStrategy) bool {
			n, ok := csParseInt32(v, minimum)
			if ok && s != nil {
				*field(s) = &n
			}
			return ok
		},
		clear: func(s *pub.InPlaceUpdateStrategy) { *field(s) = nil },
	}
}

// csPreDownloadSettings are the three image pre-download settings.
var csPreDownloadSettings = []csPreDownloadSetting{
	{
		annotation: wellknown.AnnotationImagePreDownloadParallelism,
		isSet:      func(s *pub.InPlaceUpdateStrategy) bool { return s != nil && s.ImagePreDownloadParallelism != nil },
		format: func(s *pub.InPlaceUpdateStrategy) (string, bool) {
			v := s.ImagePreDownloadParallelism.String()
			p, ok := csParseParallelism(v)
			return v, ok && p == *s.ImagePreDownloadParallelism
		},
		parse: func(v string, s *pub.InPlaceUpdateStrategy) bool {
			p, ok := csParseParallelism(v)
			if ok && s != nil {
				s.ImagePreDownloadParallelism = &p
			}
			return ok
		},
		clear: func(s *pub.InPlaceUpdateStrategy) { s.ImagePreDownloadParallelism = nil },
	},
	csInt32Setting(wellknown.AnnotationImagePreDownloadTimeoutSeconds, 1,
		func(s *pub.InPlaceUpdateStrategy) **int32 { return &s.ImagePreDownloadTimeoutSeconds }),
	csInt32Setting(wellknown.AnnotationImagePreDownloadMinUpdatedReadyPods, 0,
		func(s *pub.InPlaceUpdateStrategy) **int32 { return &s.ImagePreDownloadMinUpdatedReadyPods }),
}

// csPreDownloadToV1beta1 moves the pre-download annotations of meta that
// convert into fields of (a copy of) ius, skipping those named in raw. It
// returns the v1beta1 inPlaceUpdateStrategy, the settings kept as fields
// that the way back would otherwise turn into annotations, and whether an
// empty ius took converted fields.
func csPreDownloadToV1beta1(meta *metav1.ObjectMeta, ius *pub.InPlaceUpdateStrategy, raw []string) (*pub.InPlaceUpdateStrategy, []string, bool) {
	out := ius
	var inSpec []string
	for _, s := range csPreDownloadSettings {
		v, annotated := meta.Annotations[s.annotation]
		if s.isSet(ius) {
			if _, ok := s.format(ius); ok && !annotated {
				inSpec = append(inSpec, s.annotation)
			}
			continue
		}
		if !annotated || slices.Contains(raw, s.annotation) || !s.parse(v, nil) {
			continue
		}
		if out == ius {
			out = &pub.InPlaceUpdateStrategy{}
			if ius != nil {
				*out = *ius
			}
		}
		s.parse(v, out)
		delete(meta.Annotations, s.annotation)
	}
	meta.Annotations = csNilIfEmpty(meta.Annotations)
	emptyIUS := out != ius && ius != nil && *ius == (pub.InPlaceUpdateStrategy{})
	return out, inSpec, emptyIUS
}

// csPreDownloadToV1alpha1 moves the pre-download fields of (a copy of) ius
// that have an annotation form into annotations of meta, except those
// named in inSpec and those that already have an annotation. It returns
// the v1alpha1 inPlaceUpdateStrategy (nil when moving emptied it, unless
// emptyIUS) and the annotations to keep as annotations on the way back.
func csPreDownloadToV1alpha1(meta *metav1.ObjectMeta, ius *pub.InPlaceUpdateStrategy, inSpec []string, emptyIUS bool) (*pub.InPlaceUpdateStrategy, []string) {
	out := ius
	var raw []string
	for _, s := range csPreDownloadSettings {
		v, annotated := meta.Annotations[s.annotation]
		if !s.isSet(ius) {
			if annotated && s.parse(v, nil) {
				raw = append(raw, s.annotation)
			}
			continue
		}
		text, ok := s.format(ius)
		if annotated || !ok || slices.Contains(inSpec, s.annotation) {
			continue
		}
		if out == ius {
			c := *ius
			out = &c
		}
		s.clear(out)
		meta.Annotations = csSetKey(meta.Annotations, s.annotation, text)
	}
	if out != ius && *out == (pub.InPlaceUpdateStrategy{}) && !emptyIUS {
		out = nil
	}
	return out, raw
}

// csSetKey sets m[k] = v, making m if it is nil.
func csSetKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// csNilIfEmpty returns nil for an empty map.
func csNilIfEmpty[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

// csPtr returns a pointer to v.
func csPtr[T any](v T) *T { return &v }
