// Package podops are the pod writes every workload controller makes the
// same way: delete through the preDelete lifecycle hook, start an in-place
// update through the inPlaceUpdate hook, and move a pod along its
// lifecycle (PreparingNormal → Normal, Updating → Updated → Normal) and
// its in-place update to InPlaceUpdateReady True. Each write is recorded
// as an expectation of the owning workload and as an Event on it.
package podops

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/workload"
	"github.com/shoal-io/shoal/coordinator/workload/expectations"
	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/coordinator/workload/lifecycle"
	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// ReasonPreparingUpdate is the KruisePodReady reason while the
// inPlaceUpdate hook (with markPodNotReady) holds a pod; the pod is made
// ready again when it is back to Normal.
const ReasonPreparingUpdate = "PreparingUpdate"

// Ops writes the pods of one kind of workload.
type Ops struct {
	// Client writes pods.
	Client kubernetes.Interface
	// Recorder records Events on the workload, regarding the pod.
	Recorder events.EventRecorder
	// Expect records the writes the informer has yet to show.
	Expect *expectations.Expectations
	// Update runs in-place updates.
	Update *inplace.Updater
	// Clock stamps lifecycle states and conditions.
	Clock clock.PassiveClock
	// Kind names the workload kind in messages ("StatefulSet").
	Kind string
	// AfterDelete, when set, runs after Delete deleted a pod of owner
	// (a CloneSet deletes the pod's PVCs with it).
	AfterDelete func(ctx context.Context, owner runtime.Object, pod *corev1.Pod) error
}

// Retire deletes pod of owner (workload key), for why, unless the
// preDelete hook holds it: then it moves to PreparingDelete (KruisePodReady
// False first with markPodNotReady) and waits. It reports whether the pod
// was deleted. A pod that is gone or changed meanwhile is no error.
func (o *Ops) Retire(ctx context.Context, owner runtime.Object, key string, lc *pub.Lifecycle, pod *corev1.Pod, why string) (bool, error) {
	step := lifecycle.BeforeDelete(lc, pod)
	cur := pod
	if step.MarkNotReady {
		var err error
		if cur, err = o.SetKruisePodReady(ctx, pod, corev1.ConditionFalse, "PreparingDelete", "held by the "+o.Kind+"'s preDelete lifecycle hook"); err != nil {
			return false, err
		}
	}
	if step.Proceed {
		return true, o.Delete(ctx, owner, key, pod, why)
	}
	if step.State == "" {
		return false, nil // still held
	}
	next := cur.DeepCopy()
	lifecycle.SetState(next, step.State, o.Clock.Now())
	if _, err := o.Client.CoreV1().Pods(next.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return false, workload.IgnoreStale(err, "move pod %s to %s", pod.Name, step.State)
	}
	o.Recorder.Eventf(owner, pod, corev1.EventTypeNormal, "PreparingDelete", "Delete",
		"pod %s is held by the preDelete lifecycle hook before it is deleted (%s)", pod.Name, why)
	return false, nil
}

// Delete deletes pod of owner (workload key) at once, for why.
func (o *Ops) Delete(ctx context.Context, owner runtime.Object, key string, pod *corev1.Pod, why string) error {
	o.Expect.Expect(key, expectations.Delete, pod.Name)
	err := o.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil {
		o.Expect.Observe(key, expectations.Delete, pod.Name)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		o.Recorder.Eventf(owner, pod, corev1.EventTypeWarning, "FailedDelete", "Delete", "delete pod %s (%s): %v", pod.Name, why, err)
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	o.Recorder.Eventf(owner, pod, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "deleted pod %s: %s", pod.Name, why)
	if o.AfterDelete != nil {
		return o.AfterDelete(ctx, owner, pod)
	}
	return nil
}

// SetKruisePodReady sets the pod's KruisePodReady condition and returns
// the pod as written (p itself when nothing changed or the pod moved on).
func (o *Ops) SetKruisePodReady(ctx context.Context, p *corev1.Pod, status corev1.ConditionStatus, reason, message string) (*corev1.Pod, error) {
	pod := p.DeepCopy()
	if !lifecycle.SetKruisePodReady(pod, status, reason, message, o.Clock.Now()) {
		return p, nil
	}
	written, err := o.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return p, nil
		}
		return nil, fmt.Errorf("set %s %s on pod %s: %w", wellknown.ConditionKruisePodReady, status, pod.Name, err)
	}
	return written, nil
}

// StartInPlace starts the in-place update spec (to revision rev) of pod of
// owner (workload key), unless the inPlaceUpdate hook holds it in
// PreparingUpdate first. prepare changes the pod with the update (its
// revision labels); grace is inPlaceUpdateStrategy.gracePeriodSeconds.
func (o *Ops) StartInPlace(ctx context.Context, owner runtime.Object, key string, lc *pub.Lifecycle, pod *corev1.Pod,
	spec *inplace.Spec, rev string, grace int32, prepare func(*corev1.Pod)) error {
	step := lifecycle.BeforeInPlaceUpdate(lc, pod)
	cur := pod
	if step.MarkNotReady {
		var err error
		if cur, err = o.SetKruisePodReady(ctx, pod, corev1.ConditionFalse, ReasonPreparingUpdate, "held by the "+o.Kind+"'s inPlaceUpdate lifecycle hook"); err != nil {
			return err
		}
	}
	if !step.Proceed {
		if step.State == "" {
			return nil // still held
		}
		held := cur.DeepCopy()
		lifecycle.SetState(held, step.State, o.Clock.Now())
		if _, err := o.Client.CoreV1().Pods(held.Namespace).Update(ctx, held, metav1.UpdateOptions{}); err != nil {
			return workload.IgnoreStale(err, "move pod %s to %s", held.Name, step.State)
		}
		o.Recorder.Eventf(owner, pod, corev1.EventTypeNormal, "PreparingUpdate", "Update",
			"pod %s is held by the inPlaceUpdate lifecycle hook before it is updated", pod.Name)
		return nil
	}
	change := func(p *corev1.Pod) {
		prepare(p)
		if step.State != "" {
			lifecycle.SetState(p, step.State, o.Clock.Now())
		}
	}
	o.Expect.Expect(key, expectations.Update, pod.Name)
	if err := o.Update.Start(ctx, cur, spec, change, grace); err != nil {
		o.Expect.Observe(key, expectations.Update, pod.Name)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // a newer copy comes through the informer
		}
		o.Recorder.Eventf(owner, pod, corev1.EventTypeWarning, "FailedUpdatePodInPlace", "Update", "update pod %s in place: %v", pod.Name, err)
		return err
	}
	o.Recorder.Eventf(owner, pod, corev1.EventTypeNormal, "StartUpdatePodInPlace", "Update",
		"updating pod %s in place to revision %s (%s)", pod.Name, rev, Describe(spec))
	return nil
}

// Progress moves pod of owner one step along, one write at most:
// an in-place update through its grace period and batches to
// InPlaceUpdateReady True; PreparingNormal to Normal once the preNormal
// hook is all hooked; Updating and Updated to Normal once the
// inPlaceUpdate hook is all hooked again; and a Normal pod that the
// inPlaceUpdate hook marked not ready back to ready. It returns when to
// look again, for a grace period that ends.
func (o *Ops) Progress(ctx context.Context, owner runtime.Object, lc *pub.Lifecycle, pod *corev1.Pod, rev string) (time.Duration, error) {
	if inplace.InProgress(pod) {
		pr, err := o.Update.Refresh(ctx, pod)
		if err != nil {
			return 0, workload.IgnoreStale(err, "refresh the in-place update of pod %s", pod.Name)
		}
		if pr.Done {
			o.Recorder.Eventf(owner, pod, corev1.EventTypeNormal, "SuccessfulUpdatePodInPlace", "Update",
				"pod %s runs revision %s, updated in place", pod.Name, rev)
		} else {
			klog.FromContext(ctx).V(2).Info("In-place update in progress", "pod", pod.Name, "waiting", pr.Waiting)
		}
		return pr.RequeueAfter, nil
	}
	state := lifecycle.State(pod)
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
			cond.Status == corev1.ConditionFalse && cond.Reason == ReasonPreparingUpdate {
			_, err := o.SetKruisePodReady(ctx, pod, corev1.ConditionTrue, "", "")
			return 0, err
		}
	}
	if next == "" {
		return 0, nil
	}
	p := pod.DeepCopy()
	lifecycle.SetState(p, next, o.Clock.Now())
	if _, err := o.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		return 0, workload.IgnoreStale(err, "move pod %s to %s", p.Name, next)
	}
	return 0, nil
}

// Describe summarizes an in-place update for events.
func Describe(s *inplace.Spec) string {
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
