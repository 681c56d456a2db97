package cloneset

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/features"
	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/coordinator/workload/expectations"
	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/coordinator/workload/lifecycle"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// reasonPreparingUpdate is the KruisePodReady reason while the
// inPlaceUpdate hook (with markPodNotReady) holds a pod; the pod is made
// ready again when it is back to Normal.
const reasonPreparingUpdate = "PreparingUpdate"

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
		after, err := c.progressPod(ctx, cs, pod)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
		if after > 0 && (requeue == 0 || after < requeue) {
			requeue = after
		}
	}
	return requeue, errors.Join(errs...)
}

func (c *Controller) progressPod(ctx context.Context, cs *v1beta1.CloneSet, pod *corev1.Pod) (time.Duration, error) {
	lc := cs.Spec.Lifecycle
	state := lifecycle.State(pod)
	if inplace.InProgress(pod) {
		pr, err := c.update.Refresh(ctx, pod)
		if err != nil {
			return 0, err
		}
		if pr.Done {
			c.o.Recorder.Eventf(cs, pod, corev1.EventTypeNormal, "SuccessfulUpdatePodInPlace", "Update",
				"pod %s runs revision %s, updated in place", pod.Name, revisionOf(pod, cs.Name))
		} else {
			klog.FromContext(ctx).V(2).Info("In-place update in progress", "pod", pod.Name, "waiting", pr.Waiting)
		}
		return pr.RequeueAfter, nil
	}
	var next wellknown.LifecycleState
	switch state {
	case wellknown.LifecycleStatePreparingNormal:
		if lifecycle.MayBecomeNormal(lc, pod) {
			next = wellknown.LifecycleStateNormal
		}
	case wellknown.LifecycleStateUpdating, wellknown.LifecycleStateUpdated:
		if s := lifecycle.AfterInPlaceUpdate(lc, pod); s != state {
			next = s
		}
	case wellknown.LifecycleStateNormal, "":
		if cond := podstatus.Condition(pod, wellknown.ConditionKruisePodReady); cond != nil &&
			cond.Status == corev1.ConditionFalse && cond.Reason == reasonPreparingUpdate {
			_, err := c.setKruisePodReady(ctx, pod, corev1.ConditionTrue, "", "")
			return 0, err
		}
	}
	if next == "" {
		return 0, nil
	}
	p := pod.DeepCopy()
	lifecycle.SetState(p, next, c.o.Clock.Now())
	if _, err := c.o.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		return 0, fmt.Errorf("move pod %s to %s: %w", p.Name, next, err)
	}
	return 0, nil
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

	step := lifecycle.BeforeInPlaceUpdate(cs.Spec.Lifecycle, pod)
	cur := pod
	if step.MarkNotReady {
		if cur, err = c.markNotReady(ctx, pod, reasonPreparingUpdate, "held by the CloneSet's inPlaceUpdate lifecycle hook"); err != nil {
			return err
		}
	}
	if !step.Proceed {
		if step.State == "" {
			return nil // still held
		}
		held := cur.DeepCopy()
		lifecycle.SetState(held, step.State, c.o.Clock.Now())
		if _, err := c.o.Client.CoreV1().Pods(held.Namespace).Update(ctx, held, metav1.UpdateOptions{}); err != nil {
			return workload.IgnoreStale(err, "move pod %s to %s", held.Name, step.State)
		}
		c.o.Recorder.Eventf(cs, pod, corev1.EventTypeNormal, "PreparingUpdate", "Update",
			"pod %s is held by the inPlaceUpdate lifecycle hook before it is updated", pod.Name)
		return nil
	}

	var grace int32
	if ru.InPlaceUpdateStrategy != nil {
		grace = ru.InPlaceUpdateStrategy.GracePeriodSeconds
	}
	rev := u.to
	short := features.Enabled(c.o.Features, features.CloneSetShortHash)
	prepare := func(p *corev1.Pod) {
		setRevisionLabels(p, cs, rev, short)
		if step.State != "" {
			lifecycle.SetState(p, step.State, c.o.Clock.Now())
		}
	}
	c.Expect.Expect(key, expectations.Update, pod.Name)
	if err := c.update.Start(ctx, cur, spec, prepare, grace); err != nil {
		c.Expect.Observe(key, expectations.Update, pod.Name)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // a newer copy comes through the informer
		}
		c.o.Recorder.Eventf(cs, pod, corev1.EventTypeWarning, "FailedUpdatePodInPlace", "Update", "update pod %s in place: %v", pod.Name, err)
		return err
	}
	c.o.Recorder.Eventf(cs, pod, corev1.EventTypeNormal, "StartUpdatePodInPlace", "Update",
		"updating pod %s in place to revision %s (%s)", pod.Name, rev, describe(spec))
	return nil
}

// describe summarizes an in-place update for events.
func describe(s *inplace.Spec) string {
	switch {
	case len(s.Images) > 0 && len(s.EnvFromMetadata) > 0:
		return fmt.Sprintf("%d images, env of %d containers", len(s.Images), len(s.EnvFromMetadata))
	case len(s.Images) > 0:
		return fmt.Sprintf("%d images", len(s.Images))
	case len(s.EnvFromMetadata) > 0:
		return fmt.Sprintf("env of %d containers", len(s.EnvFromMetadata))
	default:
		return "metadata only"
	}
}
