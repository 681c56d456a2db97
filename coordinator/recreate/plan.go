// Package recreate is the coordinator's side of ContainerRecreateRequests:
// it turns each request into recreate work for the node of its pod, keeps
// the requests of one pod in a queue (oldest first, each one progressing),
// and writes the node's reports back into the request's status.
//
// decide is the whole policy as a pure function of what the controller
// observed; the controller only gathers inputs and carries out the plan.
package recreate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/coordinator/workload/inplace"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Messages of completed requests (OpenKruise's wording, which users grep
// for).
const (
	msgPodGone    = "pod has gone"
	msgNoResponse = "daemon has not responded for a long time"
	msgDeadline   = "recreating has exceeded the activeDeadlineSeconds"
)

// noResponseTimeout is how long a dispatched request may go without any
// report from the node before it is given up.
const noResponseTimeout = time.Minute

// defaultGraceSeconds is the stop grace when neither the request nor the
// pod sets one (the pod default).
const defaultGraceSeconds = 30

// input is what the controller observed about one request.
type input struct {
	// crr is the request.
	crr *v1alpha1.ContainerRecreateRequest
	// pod is the request's pod by name, nil when it does not exist.
	pod *corev1.Pod
	// queue is every not yet completed request for the same pod, crr
	// included, in any order.
	queue []*v1alpha1.ContainerRecreateRequest
	// report is the node's latest report on crr's work item, nil if none.
	report *nodeworkv1.WorkReport
	// placed says crr's work item is in the store for a node now (it may
	// have no report yet).
	placed bool
	// dispatchedAt is when crr's work was first handed to its node; zero
	// if it was not.
	dispatchedAt time.Time
	// now is the coordinator's clock.
	now time.Time
}

// plan is what the controller must make true for one request.
type plan struct {
	// status is the request's status to write (compared before writing).
	status v1alpha1.ContainerRecreateRequestStatus
	// node and spec: when spec is set, node must hold the recreate work;
	// when nil, no node may.
	node string
	spec *nodeworkv1.RecreateSpec
	// holdUnready keeps the pod's KruisePodReady condition False on behalf
	// of crr (unreadyGracePeriodSeconds); false releases it.
	holdUnready bool
	// requeueAfter, when positive, is when decide must run again even if
	// nothing changes (deadlines, grace periods, timeouts).
	requeueAfter time.Duration
}

// completed reports whether the request's status is Completed.
func completed(crr *v1alpha1.ContainerRecreateRequest) bool {
	return crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted
}

// decide returns the plan for in.crr. The unready time it needs comes from
// the request's AnnotationCRRUnreadyAcquired annotation.
func decide(in input) plan {
	crr := in.crr
	p := plan{status: *crr.Status.DeepCopy()}
	pod := in.pod
	podLive := pod != nil && pod.DeletionTimestamp == nil && string(pod.UID) == crr.Labels[wellknown.LabelCRRPodUID]
	// finishOnly keeps a request that ran out of time on its node until a
	// stop already under way is done (the node then reports a final
	// phase), and keeps its states current, as OpenKruise's daemon does.
	// Work that is not on a node (never sent, or dropped once the node
	// reported a final phase, which also drops the report) is not sent
	// again: nothing of it can be under way, and a second run would
	// report states it never saw.
	finishOnly := func() {
		if !podLive || terminal(in.report) || !in.placed {
			p.spec = nil
			return
		}
		p.node, p.spec = pod.Spec.NodeName, specFor(crr, pod)
		p.spec.FinishOnly = true
	}
	if completed(crr) {
		if crr.Status.Message == msgDeadline {
			p.status = applyReport(p.status, crr, in.report)
			finishOnly()
		}
		return p
	}
	complete := func(msg string) plan {
		p.status.Phase = v1alpha1.ContainerRecreateRequestCompleted
		p.status.Message = msg
		t := metav1.NewTime(in.now)
		p.status.CompletionTime = &t
		p.spec, p.holdUnready, p.requeueAfter = nil, false, 0
		return p
	}

	if !podLive {
		return complete(msgPodGone)
	}
	if d := crr.Spec.ActiveDeadlineSeconds; d != nil {
		left := crr.CreationTimestamp.Add(time.Duration(*d) * time.Second).Sub(in.now)
		if left <= 0 {
			// The node's states stay as last reported: a container already
			// stopped still comes back, the request just stops waiting.
			p.status = applyReport(p.status, crr, in.report)
			p = complete(msgDeadline)
			finishOnly()
			return p
		}
		p.requeueAfter = left
	}

	// One request per pod at a time, oldest first; the others wait in
	// Pending and say for which one.
	if head := queueHead(in.queue); head != nil && head.UID != crr.UID {
		p.status.Phase = v1alpha1.ContainerRecreateRequestPending
		p.status.Message = fmt.Sprintf("waiting for %s, created earlier for the same pod", head.Name)
		p.status.ContainerRecreateStates = pendingStates(crr)
		return p
	}

	// unreadyGracePeriodSeconds: take the pod out of its Services first and
	// give traffic that long to drain, when the pod can be made unready.
	if g := strategy(crr).UnreadyGracePeriodSeconds; g != nil && hasReadinessGate(pod) {
		p.holdUnready = true
		since, ok := unreadySince(crr)
		if !ok {
			p.status.Phase = v1alpha1.ContainerRecreateRequestPending
			p.status.Message = "marking the pod not ready before recreating"
			p.status.ContainerRecreateStates = pendingStates(crr)
			return p
		}
		if wait := since.Add(time.Duration(*g) * time.Second).Sub(in.now); wait > 0 {
			p.status.Phase = v1alpha1.ContainerRecreateRequestPending
			p.status.Message = fmt.Sprintf("pod marked not ready; recreating in %s (unreadyGracePeriodSeconds)", wait.Round(time.Second))
			p.status.ContainerRecreateStates = pendingStates(crr)
			p.requeueAfter = minPositive(p.requeueAfter, wait)
			return p
		}
	}

	p.node, p.spec = pod.Spec.NodeName, specFor(crr, pod)
	if in.report == nil {
		if !in.dispatchedAt.IsZero() {
			left := in.dispatchedAt.Add(noResponseTimeout).Sub(in.now)
			if left <= 0 {
				return complete(msgNoResponse)
			}
			p.requeueAfter = minPositive(p.requeueAfter, left)
		}
		p.status.Phase = v1alpha1.ContainerRecreateRequestPending
		p.status.Message = ""
		p.status.ContainerRecreateStates = pendingStates(crr)
		return p
	}

	p.status = applyReport(p.status, crr, in.report)
	switch in.report.GetPhase() {
	case nodeworkv1.Phase_PHASE_SUCCEEDED:
		return complete("")
	case nodeworkv1.Phase_PHASE_FAILED:
		return complete(in.report.GetMessage())
	case nodeworkv1.Phase_PHASE_UNSUPPORTED:
		return complete("the node's agent cannot recreate containers: " + in.report.GetMessage())
	}
	p.status.Phase = v1alpha1.ContainerRecreateRequestRecreating
	p.status.Message = in.report.GetMessage()
	return p
}

// terminal reports whether r is a final report (the node is done with the
// item).
func terminal(r *nodeworkv1.WorkReport) bool {
	switch r.GetPhase() {
	case nodeworkv1.Phase_PHASE_SUCCEEDED, nodeworkv1.Phase_PHASE_FAILED, nodeworkv1.Phase_PHASE_UNSUPPORTED:
		return true
	}
	return false
}

// queueHead is the oldest request of the queue (creation time, then name).
func queueHead(queue []*v1alpha1.ContainerRecreateRequest) *v1alpha1.ContainerRecreateRequest {
	var head *v1alpha1.ContainerRecreateRequest
	for _, c := range queue {
		if completed(c) {
			continue
		}
		if head == nil || c.CreationTimestamp.Before(&head.CreationTimestamp) ||
			(c.CreationTimestamp.Equal(&head.CreationTimestamp) && c.Name < head.Name) {
			head = c
		}
	}
	return head
}

func strategy(crr *v1alpha1.ContainerRecreateRequest) v1alpha1.ContainerRecreateRequestStrategy {
	if crr.Spec.Strategy == nil {
		return v1alpha1.ContainerRecreateRequestStrategy{}
	}
	return *crr.Spec.Strategy
}

func hasReadinessGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool {
		return g.ConditionType == wellknown.ReadinessGateKruisePodReady
	})
}

// unreadySince is when the controller marked the pod not ready for crr.
func unreadySince(crr *v1alpha1.ContainerRecreateRequest) (time.Time, bool) {
	v, ok := crr.Annotations[wellknown.AnnotationCRRUnreadyAcquired]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// pendingStates is every container Pending, keeping states already
// reported.
func pendingStates(crr *v1alpha1.ContainerRecreateRequest) []v1alpha1.ContainerRecreateRequestContainerRecreateState {
	out := make([]v1alpha1.ContainerRecreateRequestContainerRecreateState, 0, len(crr.Spec.Containers))
	for _, c := range crr.Spec.Containers {
		st := v1alpha1.ContainerRecreateRequestContainerRecreateState{Name: c.Name, Phase: v1alpha1.ContainerRecreateRequestPending}
		if i := slices.IndexFunc(crr.Status.ContainerRecreateStates, func(s v1alpha1.ContainerRecreateRequestContainerRecreateState) bool {
			return s.Name == c.Name
		}); i >= 0 {
			st = crr.Status.ContainerRecreateStates[i]
		}
		out = append(out, st)
	}
	return out
}

// applyReport copies the node's per-container states into status.
func applyReport(status v1alpha1.ContainerRecreateRequestStatus, crr *v1alpha1.ContainerRecreateRequest, r *nodeworkv1.WorkReport) v1alpha1.ContainerRecreateRequestStatus {
	status.ContainerRecreateStates = pendingStates(crr)
	if r == nil {
		return status
	}
	byName := map[string]*nodeworkv1.RecreateContainerState{}
	for _, c := range r.GetRecreate().GetContainers() {
		byName[c.GetName()] = c
	}
	for i := range status.ContainerRecreateStates {
		st := &status.ContainerRecreateStates[i]
		c, ok := byName[st.Name]
		if !ok {
			continue
		}
		st.Phase = phaseOf(c.GetPhase())
		st.Message = c.GetMessage()
		st.IsKilled = c.GetIsKilled()
	}
	return status
}

func phaseOf(p nodeworkv1.RecreatePhase) v1alpha1.ContainerRecreateRequestPhase {
	switch p {
	case nodeworkv1.RecreatePhase_RECREATE_PHASE_RECREATING:
		return v1alpha1.ContainerRecreateRequestRecreating
	case nodeworkv1.RecreatePhase_RECREATE_PHASE_SUCCEEDED:
		return v1alpha1.ContainerRecreateRequestSucceeded
	case nodeworkv1.RecreatePhase_RECREATE_PHASE_FAILED:
		return v1alpha1.ContainerRecreateRequestFailed
	default:
		return v1alpha1.ContainerRecreateRequestPending
	}
}

// specFor builds the node's work from the request and its pod.
func specFor(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod) *nodeworkv1.RecreateSpec {
	st := strategy(crr)
	grace := int64(defaultGraceSeconds)
	switch {
	case st.TerminationGracePeriodSeconds != nil:
		grace = *st.TerminationGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	s := &nodeworkv1.RecreateSpec{
		PodNamespace:            pod.Namespace,
		PodName:                 pod.Name,
		PodUid:                  string(pod.UID),
		PodIp:                   pod.Status.PodIP,
		Ordered:                 st.OrderedRecreate,
		Force:                   st.ForceRecreate,
		IgnoreFailures:          st.FailurePolicy == v1alpha1.ContainerRecreateRequestFailurePolicyIgnore,
		TerminationGraceSeconds: grace,
		MinStartedSeconds:       st.MinStartedSeconds,
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Ready && cs.ContainerID != "" {
			s.ReadyContainerIds = append(s.ReadyContainerIds, cs.ContainerID)
		}
	}
	slices.Sort(s.ReadyContainerIds)
	for _, c := range crr.Spec.Containers {
		rc := &nodeworkv1.RecreateContainer{Name: c.Name, PreStop: hookFor(c)}
		if c.StatusContext != nil {
			rc.ContainerId, rc.RestartCount = c.StatusContext.ContainerID, c.StatusContext.RestartCount
		}
		if i := slices.IndexFunc(pod.Spec.Containers, func(pc corev1.Container) bool { return pc.Name == c.Name }); i >= 0 {
			rc.HasReadinessProbe = pod.Spec.Containers[i].ReadinessProbe != nil
			if crr.Annotations[wellknown.AnnotationCRRVerifyEnvFromMetadata] == "true" {
				rc.ExpectedEnv = inplace.ExpectedEnv(pod, &pod.Spec.Containers[i])
			}
		}
		s.Containers = append(s.Containers, rc)
	}
	return s
}

// hookFor resolves a container's preStop hook (named ports through the
// ports the webhook copied). A tcpSocket hook does nothing, as in the
// kubelet; an httpGet on an unknown port name is dropped.
func hookFor(c v1alpha1.ContainerRecreateRequestContainer) *nodeworkv1.PreStopHook {
	h := c.PreStop
	switch {
	case h == nil:
		return nil
	case h.Exec != nil:
		return &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_Exec{Exec: &nodeworkv1.ExecAction{Command: slices.Clone(h.Exec.Command)}}}
	case h.HTTPGet != nil:
		port, ok := resolvePort(h.HTTPGet.Port, c.Ports)
		if !ok {
			return nil
		}
		g := &nodeworkv1.HTTPGetAction{Host: h.HTTPGet.Host, Port: port, Path: h.HTTPGet.Path, Scheme: strings.ToUpper(string(h.HTTPGet.Scheme))}
		for _, hd := range h.HTTPGet.HTTPHeaders {
			g.Headers = append(g.Headers, &nodeworkv1.HTTPHeader{Name: hd.Name, Value: hd.Value})
		}
		return &nodeworkv1.PreStopHook{Action: &nodeworkv1.PreStopHook_HttpGet{HttpGet: g}}
	default:
		return nil
	}
}

func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int32, bool) {
	if p.Type == intstr.Int {
		return p.IntVal, p.IntVal > 0 && p.IntVal <= 65535
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}
