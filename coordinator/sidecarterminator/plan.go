package sidecarterminator

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// defaultGraceSeconds is the grace of a pod that does not set
// terminationGracePeriodSeconds (the API server defaults it to 30).
const defaultGraceSeconds = 30

// terminatedMessage is the SidecarTerminated condition's message, as
// OpenKruise writes it.
const terminatedMessage = "Terminated by Sidecar Terminator"

// containers are a pod's containers by role.
type containers struct {
	// mains are the containers that are no sidecars of any kind.
	mains []string
	// normal are the sidecars with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT
	// but not KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE.
	normal []string
	// ignoreExitCode are the sidecars with both.
	ignoreExitCode []string
	// withImage maps each sidecar with
	// KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE to that image.
	withImage map[string]string
}

// envTrue reports whether c sets env name to "true" (any case).
func envTrue(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name && strings.EqualFold(e.Value, "true") {
			return true
		}
	}
	return false
}

// envValue is the value c sets env name to ("" when it does not).
func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// classify sorts the pod's containers by role. A container that has both
// kinds of sidecar env is a sidecar of each kind; which one acts depends
// on the node (see decide).
func classify(pod *corev1.Pod) containers {
	var out containers
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		kill := envTrue(c, wellknown.EnvTerminateSidecarWhenJobExit)
		image := envValue(c, wellknown.EnvTerminateSidecarWhenJobExitWithImage)
		switch {
		case kill && envTrue(c, wellknown.EnvTerminateSidecarIgnoreExitCode):
			out.ignoreExitCode = append(out.ignoreExitCode, c.Name)
		case kill:
			out.normal = append(out.normal, c.Name)
		}
		if image != "" {
			if out.withImage == nil {
				out.withImage = map[string]string{}
			}
			out.withImage[c.Name] = image
		}
		if !kill && image == "" {
			out.mains = append(out.mains, c.Name)
		}
	}
	return out
}

// usesNativeSidecars reports whether the pod has init containers with
// restartPolicy Always: the kubelet stops those itself once the regular
// containers have exited, so the terminator leaves the pod alone.
func usesNativeSidecars(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

// isVirtualKubelet reports whether node is a virtual-kubelet node (no node
// agent runs there): its type label, or, as wellknown documents, its
// provider taint.
func isVirtualKubelet(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	if node.Labels[wellknown.LabelVirtualKubelet] == wellknown.VirtualKubeletValue {
		return true
	}
	for _, t := range node.Spec.Taints {
		if t.Key == wellknown.TaintVirtualKubeletProvider {
			return true
		}
	}
	return false
}

// terminal reports whether a phase is final.
func terminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// markedTerminated reports whether the pod carries SidecarTerminated=True
// (the terminator set its phase).
func markedTerminated(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == wellknown.ConditionSidecarTerminated {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// statusOf is the pod's status of container name, nil when it has none.
func statusOf(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// allTerminated reports whether the pod's status shows every container of
// names terminated (and, with zeroExit, with exit code 0). As in
// OpenKruise, a status that does not list every container yet says no.
func allTerminated(pod *corev1.Pod, names []string, zeroExit bool) bool {
	if len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, n := range names {
		s := statusOf(pod, n)
		if s == nil || s.State.Terminated == nil || (zeroExit && s.State.Terminated.ExitCode != 0) {
			return false
		}
	}
	return true
}

// mainsDoneInStatus reports whether the pod's status shows the main
// containers finished as its restart policy requires, and whether all
// exited 0.
func mainsDoneInStatus(pod *corev1.Pod, mains []string) (done, succeeded bool) {
	succeeded = allTerminated(pod, mains, true)
	if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
		return succeeded, succeeded
	}
	return allTerminated(pod, mains, false), succeeded
}

// mainsDoneInReport reports whether the agent's report shows the main
// containers finished (and the other sidecars exited) and whether all
// mains exited 0.
func mainsDoneInReport(st *nodeworkv1.SidecarTerminateStatus) (done, succeeded bool) {
	switch st.GetStage() {
	case nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_AWAITING_GO_AHEAD:
	default:
		return false, false
	}
	for _, m := range st.GetMains() {
		if !m.GetExited() || m.GetExitCode() != 0 {
			return true, false
		}
	}
	return true, true
}

// graceSeconds is the pod's termination grace period.
func graceSeconds(pod *corev1.Pod) int64 {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
		return *g
	}
	return defaultGraceSeconds
}

// input is what decide needs about one pod.
type input struct {
	pod *corev1.Pod
	// node is the pod's node; nil when the informer does not have it
	// (then it counts as a node with an agent).
	node *corev1.Node
	// report is the node agent's latest status for this pod's work (nil
	// without one, or when it is about another pod of the same name).
	report *nodeworkv1.SidecarTerminateStatus
}

// plan is what to do about one pod.
type plan struct {
	// spec is the node's work for the pod; nil means no work.
	spec *nodeworkv1.SidecarTerminateSpec
	// setPhase, when set, is the phase to write to the pod's status with
	// the SidecarTerminated condition (ignore-exit-code sidecars).
	setPhase corev1.PodPhase
	// images are the sidecar images to set in place (virtual-kubelet
	// node), by container name.
	images map[string]string
}

// decide is the sidecar terminator's policy for one pod.
//
// A pod matters when it is not being deleted, has restartPolicy Never or
// OnFailure, uses no native sidecars (init containers with restartPolicy
// Always) and is scheduled. On a virtual-kubelet node only the sidecars
// with an image to switch to act, through the pod's spec, once the pod's
// status shows the main containers finished. On any other node the
// sidecars with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT are the node
// agent's work from the moment the pod runs, so that the agent sees the
// main containers exit itself; the ignore-exit-code ones wait for the
// pod's phase, which decide asks for once the main containers have
// finished and the other sidecars exited (by the agent's report or the
// pod's status), and for the go-ahead, given once the phase is seen.
func decide(in input) plan {
	pod := in.pod
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" || usesNativeSidecars(pod) {
		return plan{}
	}
	var policy nodeworkv1.JobRestartPolicy
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		policy = nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_NEVER
	case corev1.RestartPolicyOnFailure:
		policy = nodeworkv1.JobRestartPolicy_JOB_RESTART_POLICY_ON_FAILURE
	default:
		return plan{}
	}
	cs := classify(pod)
	if isVirtualKubelet(in.node) {
		return decideVirtual(pod, cs)
	}
	if len(cs.normal)+len(cs.ignoreExitCode) == 0 {
		return plan{}
	}
	phase := pod.Status.Phase
	marked := markedTerminated(pod)
	switch {
	case phase == corev1.PodPending || phase == "":
		return plan{}
	case terminal(phase):
		// Finished by the kubelet: nothing left to stop. Finished by the
		// terminator: the ignore-exit-code sidecars are still to stop.
		if !marked || allTerminated(pod, cs.ignoreExitCode, false) ||
			in.report.GetStage() == nodeworkv1.SidecarTerminateStage_SIDECAR_TERMINATE_STAGE_DONE {
			return plan{}
		}
	}
	mains := slices.Clone(cs.mains)
	// Sidecars with only an image to switch to are no main containers,
	// and no sidecars on this node either (as in OpenKruise).
	p := plan{spec: &nodeworkv1.SidecarTerminateSpec{
		PodNamespace: pod.Namespace, PodName: pod.Name, PodUid: string(pod.UID),
		MainContainers: mains, SidecarContainers: cs.normal, IgnoreExitCodeContainers: cs.ignoreExitCode,
		RestartPolicy: policy, TerminationGraceSeconds: graceSeconds(pod),
		StopIgnoreExitCode: terminal(phase) && marked && len(cs.ignoreExitCode) > 0,
	}}
	if len(cs.ignoreExitCode) == 0 || terminal(phase) || allTerminated(pod, cs.ignoreExitCode, false) {
		return p
	}
	done, succeeded := mainsDoneInReport(in.report)
	if !done {
		if done, succeeded = mainsDoneInStatus(pod, cs.mains); done && !allTerminated(pod, cs.normal, false) {
			done = false
		}
	}
	if done {
		p.setPhase = corev1.PodFailed
		if succeeded {
			p.setPhase = corev1.PodSucceeded
		}
	}
	return p
}

// decideVirtual handles a pod on a virtual-kubelet node: once its status
// shows the main containers finished, every sidecar with an image to
// switch to that has not terminated gets that image.
func decideVirtual(pod *corev1.Pod, cs containers) plan {
	if len(cs.withImage) == 0 || pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "" || terminal(pod.Status.Phase) {
		return plan{}
	}
	if done, _ := mainsDoneInStatus(pod, cs.mains); !done {
		return plan{}
	}
	var p plan
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		image, ok := cs.withImage[c.Name]
		if !ok || c.Image == image {
			continue
		}
		if s := statusOf(pod, c.Name); s != nil && s.State.Terminated != nil {
			continue
		}
		if p.images == nil {
			p.images = map[string]string{}
		}
		p.images[c.Name] = image
	}
	return p
}
