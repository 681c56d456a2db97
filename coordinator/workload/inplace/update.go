package inplace

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/shoal-io/shoal/coordinator/workload/podstatus"
	"github.com/shoal-io/shoal/protocol/apis/apps/pub"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// ReasonStartInPlaceUpdate is the reason of the InPlaceUpdateReady
// condition while it is False: an in-place update runs.
const ReasonStartInPlaceUpdate = "StartInPlaceUpdate"

// Updater carries out in-place updates through the API, the same way for
// every workload kind: Start begins one on a pod, Refresh moves it along
// (after the grace period, batch by batch) and marks it done.
type Updater struct {
	// Client writes the pods.
	Client kubernetes.Interface
	// Clock stamps the updates; nil is the real one.
	Clock clock.PassiveClock
	// Restart makes the containers of pod whose env reads changed labels
	// or annotations run again with the new values (the kubelet restarts a
	// container for a new image, not for new metadata), and reports when
	// they do. It is asked on every Refresh until then, for the same batch
	// (st): it must start the restart once. Nil: nothing restarts them,
	// and a container counts as done when it has started since the
	// update.
	Restart func(ctx context.Context, pod *corev1.Pod, st *pub.InPlaceUpdateState, containers []string) (bool, error)

	// finished remembers the updates (pod UID, the time its
	// InPlaceUpdateReady went False and its state annotation) that
	// Refresh marked done, until the informer shows the write: a sync on
	// any older copy of the pod (the kubelet writes status meanwhile)
	// then writes nothing again. Values are when.
	finished sync.Map
}

// finishedTTL bounds how long a finished mark is kept (the informer shows
// the write long before).
const finishedTTL = time.Minute

// EnvRestartDelay is how long after an update of env-read metadata the
// Updater waits before it asks for the restart: the kubelet builds the new
// container's env from the pod as its pod worker knows it, and a restart
// right after the change often still gets the old values (the agent then
// recreates the container again, but the kubelet's restart back-off makes
// that cost about 10 s). The update timestamp counts whole seconds, so
// this is at least a second.
const EnvRestartDelay = 2 * time.Second

// restartPoll is how often Refresh looks at a restart in progress (its
// progress is not a pod event).
const restartPoll = time.Second

// grace is the AnnotationInPlaceUpdateGrace value: the update that waits
// for the end of its grace period while the pod is already not ready.
type grace struct {
	Spec *Spec `json:"spec"`
	// UpdateTimestamp is when the pod went not ready, to the microsecond
	// so that the grace period is never cut short by rounding.
	UpdateTimestamp metav1.MicroTime `json:"updateTimestamp"`
	GraceSeconds    int32            `json:"graceSeconds"`
}

func (u *Updater) now() metav1.Time {
	if u.Clock == nil {
		return metav1.Now()
	}
	return metav1.NewTime(u.Clock.Now())
}

// InProgress reports whether an in-place update of pod has started and
// not finished: its InPlaceUpdateReady condition is False.
func InProgress(pod *corev1.Pod) bool {
	c := podstatus.Condition(pod, wellknown.ConditionInPlaceUpdateReady)
	return c != nil && c.Status == corev1.ConditionFalse
}

// Start begins moving pod to s.Revision in place. The pod goes not ready
// first (InPlaceUpdateReady False, so Services drop it before any
// container restarts); then, in one write, prepare makes the workload's
// own changes (its revision label, lifecycle state; nil for none) and
// either the first batch of s is applied or, with graceSeconds > 0, s is
// kept in the grace annotation for Refresh to apply when the period ends.
//
// The kubelet writes the pod's status as soon as it sees the condition
// (Ready False), which makes the second write conflict more often than
// not. That write is retried on a fresh copy of the pod, so that the pod
// never stays not ready without an update on its way: Refresh would take
// such a pod for a finished update and turn it ready again, and the
// kubelet would put it back into Services just before its containers
// restart.
func (u *Updater) Start(ctx context.Context, pod *corev1.Pod, s *Spec, prepare func(*corev1.Pod), graceSeconds int32) error {
	now := u.now()
	p := pod.DeepCopy()
	msg := fmt.Sprintf("in-place update to revision %s", s.Revision)
	if podstatus.SetCondition(p, wellknown.ConditionInPlaceUpdateReady, corev1.ConditionFalse, ReasonStartInPlaceUpdate, msg, now.Time) {
		var err error
		if p, err = u.patchCondition(ctx, p); err != nil {
			return fmt.Errorf("set %s False on pod %s: %w", wellknown.ConditionInPlaceUpdateReady, pod.Name, err)
		}
	}
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; attempt > 1 {
			fresh, err := u.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != pod.UID || !InProgress(fresh) {
				// Another pod under the name, or the condition was reset:
				// the workload starts over from what it sees next.
				return fmt.Errorf("pod %s changed while its in-place update started; starting over", pod.Name)
			}
			p = fresh
		}
		p = p.DeepCopy()
		if prepare != nil {
			prepare(p)
		}
		if graceSeconds > 0 {
			raw, err := json.Marshal(grace{Spec: s, UpdateTimestamp: metav1.NewMicroTime(now.Time), GraceSeconds: graceSeconds})
			if err != nil {
				return fmt.Errorf("encode in-place update grace: %w", err)
			}
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[wellknown.AnnotationInPlaceUpdateGrace] = string(raw)
		} else if err := applyBatch(p, s, now); err != nil {
			return err
		}
		_, err := u.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update pod %s in place to %s: %w", pod.Name, s.Revision, err)
	}
	return nil
}

// applyBatch applies to p the first batch of s (by container priority)
// with its state annotation, keeping the batch record of an earlier batch
// of the same revision.
func applyBatch(p *corev1.Pod, s *Spec, at metav1.Time) error {
	prev, _, err := ReadState(p)
	if err != nil {
		prev = nil // a corrupt old state is replaced
	}
	now, next := Split(p, s)
	return Apply(p, now, NewState(p, now, next, prev, at))
}

// Progress is where a pod's in-place update stands after Refresh.
type Progress struct {
	// Done is true when no in-place update of the pod is in progress: it
	// finished in this call or before, or none was started.
	Done bool
	// Waiting says what an unfinished update waits for (for logs and
	// events).
	Waiting string
	// RequeueAfter is when to look again if no pod event comes first (the
	// end of a grace period); 0 when an event will come.
	RequeueAfter time.Duration
}

// Refresh moves pod's in-place update along, at most one write per call:
// it applies an update whose grace period has ended, applies the next
// batch when the one before runs and its containers are ready, and sets
// InPlaceUpdateReady True when every batch is done. A pod that is not
// being updated is Done.
func (u *Updater) Refresh(ctx context.Context, pod *corev1.Pod) (Progress, error) {
	now := u.now()
	if raw, key, ok := graceAnnotation(pod); ok {
		var g grace
		p := pod.DeepCopy()
		delete(p.Annotations, wellknown.AnnotationInPlaceUpdateGrace)
		delete(p.Annotations, wellknown.AnnotationInPlaceUpdateGraceOld)
		if err := json.Unmarshal([]byte(raw), &g); err != nil || g.Spec == nil {
			// Not ours (or corrupt): drop it; the workload starts the
			// update again from its revisions.
			_, err := u.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
			return Progress{Waiting: "dropped an unreadable " + key + " annotation"}, ignoreGone(err)
		}
		due := g.UpdateTimestamp.Add(time.Duration(g.GraceSeconds) * time.Second)
		if left := due.Sub(now.Time); left > 0 {
			return Progress{Waiting: fmt.Sprintf("grace period (%ds)", g.GraceSeconds), RequeueAfter: left}, nil
		}
		if err := applyBatch(p, g.Spec, now); err != nil {
			return Progress{}, err
		}
		_, err := u.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return Progress{}, fmt.Errorf("apply the in-place update of pod %s after its grace period: %w", pod.Name, err)
		}
		return Progress{Waiting: "containers to restart"}, nil
	}
	if !InProgress(pod) {
		return Progress{Done: true}, nil
	}
	mark := updateMark(pod)
	if _, ok := u.finished.Load(mark); ok {
		return Progress{Waiting: "the informer to show the finished update"}, nil
	}
	st, ok, err := ReadState(pod)
	if err != nil {
		return Progress{}, err
	}
	if ok {
		_, pending := ImagesUpdated(pod, st)
		var requeue time.Duration
		if env := envOnly(st); len(env) > 0 && u.Restart != nil {
			if wait := st.UpdateTimestamp.Add(EnvRestartDelay).Sub(now.Time); wait > 0 {
				return Progress{Waiting: "the kubelet to see the new metadata", RequeueAfter: wait}, nil
			}
			done, err := u.Restart(ctx, pod, st, env)
			if err != nil {
				return Progress{}, err
			}
			if !done {
				// The restart's progress is not a pod event: look again.
				pending, requeue = append(pending, env...), restartPoll
			}
		} else if len(env) > 0 {
			pending = append(pending, envNotRestarted(pod, st, env)...)
		}
		if len(pending) > 0 {
			return Progress{Waiting: "containers " + strings.Join(pending, ", ") + " to run the update", RequeueAfter: requeue}, nil
		}
		if next := nextSpec(st); next != nil {
			var required []string
			if st.PreCheckBeforeNext != nil {
				required = st.PreCheckBeforeNext.ContainersRequiredReady
			}
			for _, c := range required {
				if !podstatus.ContainerReady(pod, c) {
					return Progress{Waiting: "container " + c + " to be ready before the next batch"}, nil
				}
			}
			p := pod.DeepCopy()
			if err := applyBatch(p, next, now); err != nil {
				return Progress{}, err
			}
			_, err := u.Client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return Progress{}, fmt.Errorf("apply the next in-place batch to pod %s: %w", pod.Name, err)
			}
			return Progress{Waiting: "the next batch of containers"}, nil
		}
	}
	p := pod.DeepCopy()
	podstatus.SetCondition(p, wellknown.ConditionInPlaceUpdateReady, corev1.ConditionTrue, "", "", now.Time)
	if _, err := u.patchCondition(ctx, p); err != nil {
		if apierrors.IsNotFound(err) {
			return Progress{Done: true}, nil
		}
		return Progress{}, fmt.Errorf("set %s True on pod %s: %w", wellknown.ConditionInPlaceUpdateReady, pod.Name, err)
	}
	u.finished.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) > finishedTTL {
			u.finished.Delete(k)
		}
		return true
	})
	u.finished.Store(mark, now.Time)
	return Progress{Done: true}, nil
}

// updateMark names one in-place update of pod: its UID, when its
// InPlaceUpdateReady went False and its state annotation (the revision
// and start of the update). Every copy of the pod during that update has
// the same mark, whatever else changed.
func updateMark(pod *corev1.Pod) string {
	var since string
	if c := podstatus.Condition(pod, wellknown.ConditionInPlaceUpdateReady); c != nil {
		since = c.LastTransitionTime.UTC().Format(time.RFC3339)
	}
	return string(pod.UID) + "/" + since + "/" + pod.Annotations[wellknown.AnnotationInPlaceUpdateState]
}

// patchCondition writes p's InPlaceUpdateReady condition with a strategic
// merge patch of the status (conditions merge by type), so that a status
// the kubelet wrote meanwhile does not make it fail with a conflict; the
// UID precondition keeps it off a pod recreated under the same name.
func (u *Updater) patchCondition(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	c := podstatus.Condition(p, wellknown.ConditionInPlaceUpdateReady)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": p.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{*c}},
	})
	if err != nil {
		return nil, err
	}
	return u.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
}

// envOnly lists the containers of st's batch that only an env change
// touches (an image change restarts the others).
func envOnly(st *pub.InPlaceUpdateState) []string {
	if !st.UpdateEnvFromMetadata || len(st.ContainerBatchesRecord) == 0 {
		return nil
	}
	var out []string
	for _, c := range st.ContainerBatchesRecord[len(st.ContainerBatchesRecord)-1].Containers {
		if _, image := st.LastContainerStatuses[c]; !image {
			out = append(out, c)
		}
	}
	return out
}

// envNotRestarted lists the containers of env that have not run since the
// update started.
func envNotRestarted(pod *corev1.Pod, st *pub.InPlaceUpdateState, env []string) []string {
	var out []string
	for _, c := range env {
		s := containerStatus(pod, c)
		if s == nil || s.State.Running == nil || s.State.Running.StartedAt.Before(&st.UpdateTimestamp) {
			out = append(out, c)
		}
	}
	return out
}

// nextSpec is the batch that waits in st, nil if none does.
func nextSpec(st *pub.InPlaceUpdateState) *Spec {
	if len(st.NextContainerImages) == 0 && len(st.NextContainerRefMetadata) == 0 {
		return nil
	}
	s := &Spec{Revision: st.Revision}
	for c, img := range st.NextContainerImages {
		if s.Images == nil {
			s.Images = map[string]string{}
		}
		s.Images[c] = img
	}
	for c, meta := range st.NextContainerRefMetadata {
		var refs MetadataRefs
		for k, v := range meta.Labels {
			refs.Labels = append(refs.Labels, k)
			if s.Labels == nil {
				s.Labels = map[string]*string{}
			}
			s.Labels[k] = &v
		}
		for k, v := range meta.Annotations {
			refs.Annotations = append(refs.Annotations, k)
			if s.Annotations == nil {
				s.Annotations = map[string]*string{}
			}
			s.Annotations[k] = &v
		}
		if s.EnvFromMetadata == nil {
			s.EnvFromMetadata = map[string]MetadataRefs{}
		}
		s.EnvFromMetadata[c] = refs
	}
	return s
}

// graceAnnotation returns the pod's grace annotation and its key.
func graceAnnotation(pod *corev1.Pod) (string, string, bool) {
	for _, key := range []string{wellknown.AnnotationInPlaceUpdateGrace, wellknown.AnnotationInPlaceUpdateGraceOld} {
		if v, ok := pod.Annotations[key]; ok {
			return v, key, true
		}
	}
	return "", "", false
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
