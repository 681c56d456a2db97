package cloneset

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/shoal-io/shoal/coordinator/features"
	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// progress moves along the pods of cs that are on their way somewhere, one
// write per pod per pass: PreparingNormal pods become Normal once
// scheduled with the preNormal hook all hooked; in-place updates go
// through their grace period and batches to InPlaceUpdateReady True;
// updated pods go through Updated (until the inPlaceUpdate hook is all
// hooked again) back to Normal and, if the hook marked them not ready,
// ready. It returns when to look again for a grace period that ends.
func (c *Controller) progress(ctx context.Context, cs *v1beta1.CloneSet, p *plan) (time.Duration, error) {
	var requeue time.Duration
	var errs []error
	for _, pod := range p.active {
		after, err := c.ops.Progress(ctx, cs, cs.Spec.Lifecycle, pod, revisionOf(pod, cs.Name))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	return requeue, errors.Join(errs...)
}

// updateInPlace moves one pod of cs to revision u.to in place (the update
// revision, or the current one for a partition rollback). A pod whose
// revision differs from the target in more than images and metadata is
// recreated under InPlaceIfPossible and left alone, with a FailedUpdate
// condition saying why, under InPlaceOnly. The inPlaceUpdate lifecycle
// hook may hold the pod in PreparingUpdate first.
func (c *Controller) updateInPlace(ctx context.Context, cs *v1beta1.CloneSet, key string, u update, p *plan) error {
	ru := cs.Spec.UpdateStrategy.RollingUpdate
	pod := u.pod
	from, err := c.revisionTemplate(cs, revisionOf(pod, cs.Name))
	to := &cs.Spec.Template // the update revision, maybe not in the informer yet
	if err == nil && u.to != p.updateRev {
		to, err = c.revisionTemplate(cs, u.to)
	}
	var spec *inplace.Spec
	if err == nil {
		spec, err = inplace.Calculate(from, to, u.to)
	}
	if err != nil {
		if ru.PodUpdatePolicy == v1beta1.InPlaceOnlyCloneSetPodUpdateStrategyType {
			p.updateBlocked = fmt.Sprintf("InPlaceOnly: pod %s cannot be updated in place to %s: %v; change only images, labels and annotations, or use podUpdatePolicy InPlaceIfPossible or ReCreate", pod.Name, u.to, err)
			return nil
		}
		return c.retire(ctx, cs, key, deletion{pod, fmt.Sprintf("recreated at revision %s (not in place: %v)", u.to, err)})
	}

	var grace int32
	if ru.InPlaceUpdateStrategy != nil {
		grace = ru.InPlaceUpdateStrategy.GracePeriodSeconds
	}
	short := features.Enabled(c.o.Features, features.CloneSetShortHash)
	return c.ops.StartInPlace(ctx, cs, key, cs.Spec.Lifecycle, pod, spec, u.to, grace, func(p *corev1.Pod) {
		setRevisionLabels(p, cs, u.to, short)
	})
}
