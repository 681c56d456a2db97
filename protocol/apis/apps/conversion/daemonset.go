//lint:file-ignore SA1019 v1alpha1 rollingUpdateType Surging is deprecated, and converting it is this file's job.

package conversion

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// Advanced DaemonSet differs between the versions in four places:
//
//   - rollingUpdate.rollingUpdateType Surging (deprecated, v1alpha1 only)
//     means Standard with maxSurge 1 and maxUnavailable 0 by default. It
//     becomes Standard in v1beta1, with those two defaults written out
//     when they were unset; the stash remembers Surging and which of the
//     two it wrote, so the way back clears them again.
//   - rollingUpdate.partition is an integer in v1alpha1 and an integer or a
//     percentage in v1beta1. Integers map; a percentage has no v1alpha1
//     form and is stashed (v1alpha1 sees no partition).
//   - v1alpha1's annotation daemonset.kruise.io/progressive-create-pod
//     "true" or "false" is v1beta1's scaleStrategy.partitionedScaling true
//     or false; other values of the annotation stay annotations. A v1beta1
//     object that carries the annotation itself where it would be read as
//     the field keeps it in the stash.
//   - status.daemonSetHash is status.updateRevision.

func init() { register("DaemonSet", daemonSetToV1beta1, daemonSetToV1alpha1) }

// daemonSetAlphaFields are the v1alpha1 facts a v1beta1 DaemonSet cannot
// hold, stashed on the v1beta1 object.
type daemonSetAlphaFields struct {
	// Surging is set when rollingUpdateType was Surging.
	Surging bool `json:"surging,omitempty"`
	// FilledMaxSurge is set when maxSurge was unset and Surging's default
	// (1) was written out in v1beta1.
	FilledMaxSurge bool `json:"filledMaxSurge,omitempty"`
	// FilledMaxUnavailable is set when maxUnavailable was unset and
	// Surging's default (0) was written out in v1beta1.
	FilledMaxUnavailable bool `json:"filledMaxUnavailable,omitempty"`
}

// daemonSetBetaFields are the v1beta1 facts a v1alpha1 DaemonSet cannot
// hold, stashed on the v1alpha1 object.
type daemonSetBetaFields struct {
	// Partition is a partition given as a percentage (or any string).
	Partition *intstr.IntOrString `json:"partition,omitempty"`
	// ProgressiveAnnotation is the value the v1beta1 object's own
	// daemonset.kruise.io/progressive-create-pod annotation had, when
	// v1alpha1 would have read it as scaleStrategy or the field took its
	// place.
	ProgressiveAnnotation *string `json:"progressiveAnnotation,omitempty"`
}

// Surging's defaults for unset maxSurge and maxUnavailable.
var (
	surgingMaxSurge       = intstr.FromInt32(1)
	surgingMaxUnavailable = intstr.FromInt32(0)
)

// daemonSetToV1beta1 converts a v1alpha1 Advanced DaemonSet to v1beta1.
func daemonSetToV1beta1(in *v1alpha1.DaemonSet, out *v1beta1.DaemonSet) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var beta daemonSetBetaFields
	if _, err := Unstash(&out.ObjectMeta, "v1beta1", &beta); err != nil {
		return err
	}
	var alpha daemonSetAlphaFields

	s := &in.Spec
	out.Spec = v1beta1.DaemonSetSpec{
		Selector: s.Selector,
		Template: s.Template,
		UpdateStrategy: v1beta1.DaemonSetUpdateStrategy{
			Type: v1beta1.DaemonSetUpdateStrategyType(s.UpdateStrategy.Type),
		},
		MinReadySeconds:      s.MinReadySeconds,
		BurstReplicas:        s.BurstReplicas,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
		Lifecycle:            s.Lifecycle,
	}
	if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
		r := &v1beta1.RollingUpdateDaemonSet{
			Type:           v1beta1.RollingUpdateType(ru.Type),
			MaxUnavailable: ru.MaxUnavailable,
			MaxSurge:       ru.MaxSurge,
			Selector:       ru.Selector,
			Paused:         ru.Paused,
		}
		if ru.Type == v1alpha1.DeprecatedSurgingRollingUpdateType {
			alpha.Surging = true
			r.Type = v1beta1.StandardRollingUpdateType
			if r.MaxSurge == nil {
				v := surgingMaxSurge
				r.MaxSurge = &v
				alpha.FilledMaxSurge = true
			}
			if r.MaxUnavailable == nil {
				v := surgingMaxUnavailable
				r.MaxUnavailable = &v
				alpha.FilledMaxUnavailable = true
			}
		}
		switch {
		case ru.Partition != nil:
			// A partition set at v1alpha1 wins over a stashed percentage:
			// it was set (or changed) there since.
			p := intstr.FromInt32(*ru.Partition)
			r.Partition = &p
		case beta.Partition != nil:
			r.Partition = beta.Partition
		}
		out.Spec.UpdateStrategy.RollingUpdate = r
	}

	// The annotation becomes scaleStrategy when it says true or false.
	// The v1beta1 object's own annotation comes back from the stash unless
	// the v1alpha1 object now has another value there.
	key := wellknown.AnnotationDaemonSetProgressiveCreatePod
	v, ok := out.Annotations[key]
	if ok && (v == "true" || v == "false") {
		out.Spec.ScaleStrategy = &v1beta1.DaemonSetScaleStrategy{PartitionedScaling: v == "true"}
		dsDeleteAnnotation(&out.ObjectMeta, key)
		ok = false
	}
	if beta.ProgressiveAnnotation != nil && !ok {
		dsSetAnnotation(&out.ObjectMeta, key, *beta.ProgressiveAnnotation)
	}

	st := &in.Status
	out.Status = v1beta1.DaemonSetStatus{
		CurrentNumberScheduled: st.CurrentNumberScheduled,
		NumberMisscheduled:     st.NumberMisscheduled,
		DesiredNumberScheduled: st.DesiredNumberScheduled,
		NumberReady:            st.NumberReady,
		ObservedGeneration:     st.ObservedGeneration,
		UpdatedNumberScheduled: st.UpdatedNumberScheduled,
		NumberAvailable:        st.NumberAvailable,
		NumberUnavailable:      st.NumberUnavailable,
		CollisionCount:         st.CollisionCount,
		Conditions:             st.Conditions,
		UpdateRevision:         st.DaemonSetHash,
	}
	return Stash(&out.ObjectMeta, "v1alpha1", &alpha)
}

// daemonSetToV1alpha1 converts a v1beta1 Advanced DaemonSet to v1alpha1.
func daemonSetToV1alpha1(in *v1beta1.DaemonSet, out *v1alpha1.DaemonSet) error {
	out.ObjectMeta = copyMeta(&in.ObjectMeta)
	var alpha daemonSetAlphaFields
	if _, err := Unstash(&out.ObjectMeta, "v1alpha1", &alpha); err != nil {
		return err
	}
	var beta daemonSetBetaFields

	s := &in.Spec
	out.Spec = v1alpha1.DaemonSetSpec{
		Selector: s.Selector,
		Template: s.Template,
		UpdateStrategy: v1alpha1.DaemonSetUpdateStrategy{
			Type: v1alpha1.DaemonSetUpdateStrategyType(s.UpdateStrategy.Type),
		},
		MinReadySeconds:      s.MinReadySeconds,
		BurstReplicas:        s.BurstReplicas,
		RevisionHistoryLimit: s.RevisionHistoryLimit,
		Lifecycle:            s.Lifecycle,
	}
	if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
		r := &v1alpha1.RollingUpdateDaemonSet{
			Type:           v1alpha1.RollingUpdateType(ru.Type),
			MaxUnavailable: ru.MaxUnavailable,
			MaxSurge:       ru.MaxSurge,
			Selector:       ru.Selector,
			Paused:         ru.Paused,
		}
		// Surging comes back only from Standard: a type changed at v1beta1
		// since wins.
		if alpha.Surging && ru.Type == v1beta1.StandardRollingUpdateType {
			r.Type = v1alpha1.DeprecatedSurgingRollingUpdateType
			if alpha.FilledMaxSurge && dsIntOrStringIs(r.MaxSurge, surgingMaxSurge) {
				r.MaxSurge = nil
			}
			if alpha.FilledMaxUnavailable && dsIntOrStringIs(r.MaxUnavailable, surgingMaxUnavailable) {
				r.MaxUnavailable = nil
			}
		}
		if p := ru.Partition; p != nil {
			if p.Type == intstr.Int {
				v := p.IntVal
				r.Partition = &v
			} else {
				beta.Partition = p
			}
		}
		out.Spec.UpdateStrategy.RollingUpdate = r
	}

	// scaleStrategy becomes the annotation. The object's own annotation is
	// kept as it is unless v1alpha1 would read it as scaleStrategy (true or
	// false) or scaleStrategy takes its place; then it goes to the stash.
	key := wellknown.AnnotationDaemonSetProgressiveCreatePod
	own, had := out.Annotations[key]
	if had && (s.ScaleStrategy != nil || own == "true" || own == "false") {
		beta.ProgressiveAnnotation = &own
		dsDeleteAnnotation(&out.ObjectMeta, key)
	}
	if ss := s.ScaleStrategy; ss != nil {
		v := "false"
		if ss.PartitionedScaling {
			v = "true"
		}
		dsSetAnnotation(&out.ObjectMeta, key, v)
	}

	st := &in.Status
	out.Status = v1alpha1.DaemonSetStatus{
		CurrentNumberScheduled: st.CurrentNumberScheduled,
		NumberMisscheduled:     st.NumberMisscheduled,
		DesiredNumberScheduled: st.DesiredNumberScheduled,
		NumberReady:            st.NumberReady,
		ObservedGeneration:     st.ObservedGeneration,
		UpdatedNumberScheduled: st.UpdatedNumberScheduled,
		NumberAvailable:        st.NumberAvailable,
		NumberUnavailable:      st.NumberUnavailable,
		CollisionCount:         st.CollisionCount,
		Conditions:             st.Conditions,
		DaemonSetHash:          st.UpdateRevision,
	}
	return Stash(&out.ObjectMeta, "v1beta1", &beta)
}

// dsIntOrStringIs reports whether p is set and equal to v.
func dsIntOrStringIs(p *intstr.IntOrString, v intstr.IntOrString) bool {
	return p != nil && *p == v
}

// dsSetAnnotation sets one annotation of meta.
func dsSetAnnotation(meta *metav1.ObjectMeta, key, value string) {
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = value
}

// dsDeleteAnnotation removes one annotation of meta, leaving nil rather
// than an empty map.
func dsDeleteAnnotation(meta *metav1.ObjectMeta, key string) {
	delete(meta.Annotations, key)
	if len(meta.Annotations) == 0 {
		meta.Annotations = nil
	}
}
