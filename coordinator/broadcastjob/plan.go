package broadcastjob

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/coordinator/workload/placement"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
)

// Reasons of the job's conditions and events.
const (
	reasonDeadlineExceeded = "DeadlineExceeded"
	reasonPodFailed        = "PodFailed"
	reasonCompleted        = "Completed"
)

// plan is one pass's decisions about a BroadcastJob, from the nodes and
// its pods as the informers show them; it is pure (no API calls).
type plan struct {
	// create are the nodes to give a pod now (within parallelism).
	create []string
	// deletes are pods to delete (the job ended; their work is void).
	deletes []*corev1.Pod
	// pause says the job pauses itself (failurePolicy Pause).
	pause bool
	// status is the job's new status.
	status v1beta1.BroadcastJobStatus
	// finished says why the job ended now ("" while it runs): a
	// condition reason.
	finished string
	// requeueAfter asks to look again (the active deadline).
	requeueAfter time.Duration
}

// failedPod reports whether a pod of the job failed: phase Failed, or (a
// pod restarted in place under restartPolicy OnFailure) more restarts
// than failurePolicy.restartLimit, counted over all its containers, init
// containers too, as OpenKruise counts them.
func failedPod(p *corev1.Pod, restartLimit int32) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		restarts += s.RestartCount
	}
	return restarts > restartLimit
}

// parallelism resolves spec.parallelism against the eligible nodes (a
// percentage rounds up); unset is no limit.
func parallelism(job *v1beta1.BroadcastJob, desired int) (int, error) {
	if job.Spec.Parallelism == nil {
		return math.MaxInt32, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(job.Spec.Parallelism, desired, true)
	if err != nil {
		return 0, fmt.Errorf("spec.parallelism %q: %w", job.Spec.Parallelism.String(), err)
	}
	return n, nil
}

// newPlan decides what to do with job at now, given the cluster's nodes
// and the job's pods (not being deleted).
func newPlan(job *v1beta1.BroadcastJob, nodes []*corev1.Node, pods []*corev1.Pod, now time.Time) (*plan, error) {
	p := &plan{status: *job.Status.DeepCopy()}
	st := &p.status
	if st.StartTime == nil {
		st.StartTime = &metav1.Time{Time: now}
	}
	byNode := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		byNode[placement.TargetNode(pod)] = append(byNode[placement.TargetNode(pod)], pod)
	}
	var eligibleNodes []string
	for _, n := range nodes {
		if placement.Eligible(&job.Spec.Template.Spec, n) {
			eligibleNodes = append(eligibleNodes, n.Name)
		}
	}
	sort.Strings(eligibleNodes)

	restartLimit := job.Spec.FailurePolicy.RestartLimit
	// overLimit pods failed by their restarts but still run: stopped when
	// the job ends (deleting them earlier would only bring a new pod).
	var active, overLimit []*corev1.Pod
	var failedNames []string
	st.Active, st.Succeeded, st.Failed = 0, 0, 0
	for _, pod := range pods {
		switch {
		case pod.Status.Phase == corev1.PodSucceeded:
			st.Succeeded++
		case failedPod(pod, restartLimit):
			st.Failed++
			failedNames = append(failedNames, pod.Name)
			if pod.Status.Phase != corev1.PodFailed {
				overLimit = append(overLimit, pod)
			}
		case !slices.Contains(eligibleNodes, placement.TargetNode(pod)):
			// Its node went away or no longer fits: the pod cannot run
			// (or must not); it goes, and does not count.
			p.deletes = append(p.deletes, pod)
		default:
			st.Active++
			active = append(active, pod)
		}
	}
	st.Desired = int32(len(eligibleNodes))
	always := job.Spec.CompletionPolicy.Type != v1beta1.Never

	// The job ends: FailFast at a failed pod, or its active deadline.
	failure := job.Spec.FailurePolicy.Type
	switch {
	case len(failedNames) > 0 && (failure == "" || failure == v1beta1.FailurePolicyTypeFailFast):
		p.finished = reasonPodFailed
		p.fail(now, reasonPodFailed, fmt.Sprintf("pod %s failed and failurePolicy is FailFast", failedNames[0]), append(active, overLimit...))
		return p, nil
	case always && job.Spec.CompletionPolicy.ActiveDeadlineSeconds != nil:
		deadline := st.StartTime.Add(time.Duration(*job.Spec.CompletionPolicy.ActiveDeadlineSeconds) * time.Second)
		if !now.Before(deadline) {
			p.finished = reasonDeadlineExceeded
			p.fail(now, reasonDeadlineExceeded, fmt.Sprintf("the job ran past its activeDeadlineSeconds (%ds)", *job.Spec.CompletionPolicy.ActiveDeadlineSeconds), append(active, overLimit...))
			return p, nil
		}
		p.requeueAfter = deadline.Sub(now)
	}
	if len(failedNames) > 0 && failure == v1beta1.FailurePolicyTypePause && !job.Spec.Paused {
		p.pause = true
	}

	// Pods for eligible nodes that have none, within parallelism.
	limit, err := parallelism(job, len(eligibleNodes))
	if err != nil {
		return nil, err
	}
	var waiting []string
	for _, n := range eligibleNodes {
		if len(byNode[n]) == 0 {
			waiting = append(waiting, n)
		}
	}
	if !job.Spec.Paused && !p.pause {
		p.create = waiting[:min(len(waiting), max(limit-int(st.Active), 0))]
	}

	switch {
	case always && len(eligibleNodes) > 0 && len(waiting) == 0 && st.Active == 0:
		// Every eligible node ran its pod (a job with no eligible node
		// yet waits for one, as OpenKruise's does).
		p.finished = reasonCompleted
		p.deletes = overLimit
		st.Phase = v1beta1.PhaseCompleted
		st.CompletionTime = &metav1.Time{Time: now}
		setCondition(st, v1beta1.JobComplete, reasonCompleted,
			fmt.Sprintf("%d pods ran on %d nodes: %d succeeded, %d failed", st.Succeeded+st.Failed, len(eligibleNodes), st.Succeeded, st.Failed), now)
	case job.Spec.Paused || p.pause:
		st.Phase = v1beta1.PhasePaused
	default:
		st.Phase = v1beta1.PhaseRunning
	}
	return p, nil
}

// fail ends the job as failed and deletes its active pods.
func (p *plan) fail(now time.Time, reason, message string, active []*corev1.Pod) {
	st := &p.status
	st.Phase = v1beta1.PhaseFailed
	st.CompletionTime = &metav1.Time{Time: now}
	setCondition(st, v1beta1.JobFailed, reason, message, now)
	p.create = nil
	p.deletes = append(p.deletes, active...)
}

// setCondition sets condition t True on st.
func setCondition(st *v1beta1.BroadcastJobStatus, t v1beta1.JobConditionType, reason, message string, now time.Time) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			st.Conditions[i].Status, st.Conditions[i].Reason, st.Conditions[i].Message = corev1.ConditionTrue, reason, message
			st.Conditions[i].LastProbeTime = metav1.Time{Time: now}
			return
		}
	}
	st.Conditions = append(st.Conditions, v1beta1.JobCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: metav1.Time{Time: now}, LastTransitionTime: metav1.Time{Time: now},
	})
}

// finishedJob reports whether job has ended (a Complete or Failed
// condition True).
func finishedJob(job *v1beta1.BroadcastJob) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == v1beta1.JobComplete || c.Type == v1beta1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
