package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
)

// CRRMutatePath is where CRRAdmission.Mutate is served.
const CRRMutatePath = "/mutate-containerrecreaterequest"

// CRRValidatePath is where CRRAdmission.Validate is served.
const CRRValidatePath = "/validate-containerrecreaterequest"

// crrMinActiveDeadlineSeconds is the smallest spec.activeDeadlineSeconds a
// ContainerRecreateRequest may ask for.
const crrMinActiveDeadlineSeconds = 3

// PodGetter looks up a pod, typically from an informer cache.
type PodGetter interface {
	// Pod returns the pod, or an error for which apierrors.IsNotFound is
	// true when there is no such pod.
	Pod(namespace, name string) (*corev1.Pod, error)
}

// PodGetterFunc adapts a function, such as a pod lister's
// Pods(namespace).Get, to PodGetter.
type PodGetterFunc func(namespace, name string) (*corev1.Pod, error)

// Pod calls f.
func (f PodGetterFunc) Pod(namespace, name string) (*corev1.Pod, error) { return f(namespace, name) }

// NodeGetter looks up a node, typically from an informer cache.
type NodeGetter interface {
	// Node returns the node, or an error for which apierrors.IsNotFound is
	// true when there is no such node.
	Node(name string) (*corev1.Node, error)
}

// CRRAdmission defaults and validates ContainerRecreateRequests. Mutate,
// served at CRRMutatePath for CREATE, checks the request against its pod and
// fills in what the node agent needs (labels, strategy defaults, each
// container's preStop, ports and status context). Validate, served at
// CRRValidatePath for CREATE and UPDATE, re-checks the spec after all
// mutating webhooks have run and keeps the spec and the identifying labels
// unchanged afterwards.
type CRRAdmission struct {
	pods  PodGetter
	nodes NodeGetter
}

// NewCRRAdmission returns the ContainerRecreateRequest admission handlers,
// looking pods up through pods (which must not be nil).
func NewCRRAdmission(pods PodGetter) *CRRAdmission {
	return &CRRAdmission{pods: pods}
}

// WithNodes makes Mutate also look up the pod's node and, when it is a
// virtual-kubelet node, copy the virtual-kubelet label onto the request, as
// OpenKruise does. Without it the label is never set. It returns a.
func (a *CRRAdmission) WithNodes(nodes NodeGetter) *CRRAdmission {
	a.nodes = nodes
	return a
}

var (
	_ Handler = (*CRRAdmission)(nil).Mutate
	_ Handler = (*CRRAdmission)(nil).Validate
)

// Mutate handles CREATE of a ContainerRecreateRequest: it denies requests
// for pods that are missing, terminating, unscheduled or not running (a pod
// with the SidecarTerminated condition may be in any phase) and for
// containers that are not started regular containers of the pod; otherwise
// it answers with a JSON patch that sets the node-name, pod-uid, pod-name
// and active labels, defaults the strategy, and fills each container's
// read-only preStop, ports and statusContext from the pod. Values the user
// set are kept, except those read-only fields. Other operations are allowed
// unchanged.
func (a *CRRAdmission) Mutate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	crr, resp := decodeCRR(req.Object.Raw, "object")
	if resp != nil {
		return resp
	}
	orig := crr.DeepCopy()
	namespace := req.Namespace
	if namespace == "" {
		namespace = crr.Namespace
	}

	problems := checkCRRSpec(&crr.Spec, namespace)
	if crr.Spec.Strategy == nil {
		crr.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{}
	}
	if crr.Spec.Strategy.FailurePolicy == "" {
		crr.Spec.Strategy.FailurePolicy = v1alpha1.ContainerRecreateRequestFailurePolicyFail
	}
	if crr.Spec.PodName == "" {
		return Deny(strings.Join(problems, "\n"))
	}

	pod, err := a.pods.Pod(namespace, crr.Spec.PodName)
	switch {
	case apierrors.IsNotFound(err):
		return Deny(strings.Join(append(problems, fmt.Sprintf(
			"spec.podName: pod %q not found in namespace %q; name an existing pod of the request's namespace",
			crr.Spec.PodName, namespace)), "\n"))
	case err != nil:
		klog.FromContext(ctx).Error(err, "Look up the pod of a ContainerRecreateRequest", "pod", klog.KRef(namespace, crr.Spec.PodName))
		return internalError(fmt.Sprintf("could not look up pod %q in namespace %q: %v", crr.Spec.PodName, namespace, err))
	}
	if p := checkCRRPod(pod); p != "" {
		return Deny(strings.Join(append(problems, p), "\n"))
	}
	problems = append(problems, fillCRRContainers(crr.Spec.Containers, pod)...)
	if len(problems) > 0 {
		return Deny(strings.Join(problems, "\n"))
	}

	if crr.Spec.Strategy.TerminationGracePeriodSeconds == nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		grace := *pod.Spec.TerminationGracePeriodSeconds
		crr.Spec.Strategy.TerminationGracePeriodSeconds = &grace
	}
	if crr.Labels == nil {
		crr.Labels = map[string]string{}
	}
	crr.Labels[wellknown.LabelCRRNodeName] = pod.Spec.NodeName
	crr.Labels[wellknown.LabelCRRPodUID] = string(pod.UID)
	crr.Labels[wellknown.LabelCRRPodName] = pod.Name
	crr.Labels[wellknown.LabelCRRActive] = "true"
	if a.nodes != nil {
		node, err := a.nodes.Node(pod.Spec.NodeName)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			klog.FromContext(ctx).Error(err, "Look up the node of a ContainerRecreateRequest's pod", "node", pod.Spec.NodeName)
			return internalError(fmt.Sprintf("could not look up node %q of pod %q: %v", pod.Spec.NodeName, pod.Name, err))
		case node.Labels[wellknown.LabelVirtualKubelet] == wellknown.VirtualKubeletValue:
			crr.Labels[wellknown.LabelVirtualKubelet] = wellknown.VirtualKubeletValue
		}
	}

	patch, err := crrPatch(req.Object.Raw, orig, crr)
	if err != nil {
		return internalError(fmt.Sprintf("could not build the JSON patch: %v", err))
	}
	resp = &admissionv1.AdmissionResponse{Allowed: true}
	if patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

// Validate handles CREATE and UPDATE of a ContainerRecreateRequest. On
// CREATE it re-checks, without looking anything up, what Mutate guarantees
// but a later mutating webhook could undo: the spec rules, the labels and
// each container's statusContext. On UPDATE it denies any change to the
// spec, and changing or removing the node-name, pod-uid and pod-name labels
// and the unready-acquired annotation once they are set. Other operations
// are allowed.
func (a *CRRAdmission) Validate(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	switch req.Operation {
	case admissionv1.Create:
		crr, resp := decodeCRR(req.Object.Raw, "object")
		if resp != nil {
			return resp
		}
		namespace := req.Namespace
		if namespace == "" {
			namespace = crr.Namespace
		}
		problems := checkCRRSpec(&crr.Spec, namespace)
		for _, key := range []string{wellknown.LabelCRRNodeName, wellknown.LabelCRRPodUID} {
			if crr.Labels[key] == "" {
				problems = append(problems, fmt.Sprintf("metadata.labels[%s]: missing; it is set by the mutating webhook at %s, check that the %s MutatingWebhookConfiguration is installed",
					key, CRRMutatePath, crrMutatingConfiguration))
			}
		}
		for i, c := range crr.Spec.Containers {
			if c.StatusContext == nil || c.StatusContext.ContainerID == "" {
				problems = append(problems, fmt.Sprintf("spec.containers[%d].statusContext: missing; it is set by the mutating webhook at %s, check that the %s MutatingWebhookConfiguration is installed",
					i, CRRMutatePath, crrMutatingConfiguration))
			}
		}
		if len(problems) > 0 {
			return Deny(strings.Join(problems, "\n"))
		}
		return &admissionv1.AdmissionResponse{Allowed: true}

	case admissionv1.Update:
		crr, resp := decodeCRR(req.Object.Raw, "object")
		if resp != nil {
			return resp
		}
		old, resp := decodeCRR(req.OldObject.Raw, "old object")
		if resp != nil {
			return resp
		}
		var problems []string
		if !apiequality.Semantic.DeepEqual(old.Spec, crr.Spec) {
			problems = append(problems, "spec: is immutable; delete the request and create a new one")
		}
		for _, key := range []string{wellknown.LabelCRRNodeName, wellknown.LabelCRRPodUID, wellknown.LabelCRRPodName} {
			if was := old.Labels[key]; was != "" && crr.Labels[key] != was {
				problems = append(problems, fmt.Sprintf("metadata.labels[%s]: is immutable once set; keep it %q", key, was))
			}
		}
		key := wellknown.AnnotationCRRUnreadyAcquired
		if was := old.Annotations[key]; was != "" && crr.Annotations[key] != was {
			problems = append(problems, fmt.Sprintf("metadata.annotations[%s]: is immutable once set; keep it %q", key, was))
		}
		if len(problems) > 0 {
			return Deny(strings.Join(problems, "\n"))
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// crrMutatingConfiguration is the MutatingWebhookConfiguration in
// deploy/webhooks.yaml that serves CRRMutatePath.
const crrMutatingConfiguration = "shoal-mutating"

func decodeCRR(raw []byte, what string) (*v1alpha1.ContainerRecreateRequest, *admissionv1.AdmissionResponse) {
	crr := &v1alpha1.ContainerRecreateRequest{}
	if len(raw) == 0 {
		return nil, badRequest(fmt.Sprintf("could not decode the ContainerRecreateRequest: the admission request has no %s", what))
	}
	if err := json.Unmarshal(raw, crr); err != nil {
		return nil, badRequest(fmt.Sprintf("could not decode the ContainerRecreateRequest (%s): %v", what, err))
	}
	return crr, nil
}

// checkCRRSpec checks what can be checked without the pod, in field order.
// An empty strategy.failurePolicy is accepted (it defaults to Fail).
func checkCRRSpec(spec *v1alpha1.ContainerRecreateRequestSpec, namespace string) []string {
	var problems []string
	if spec.PodName == "" {
		problems = append(problems, fmt.Sprintf("spec.podName: required; set it to the name of a running pod in namespace %q", namespace))
	}
	if len(spec.Containers) == 0 {
		problems = append(problems, "spec.containers: must list at least one container; name the pod's containers to recreate")
	}
	seen := make(map[string]bool, len(spec.Containers))
	for i, c := range spec.Containers {
		switch {
		case c.Name == "":
			problems = append(problems, fmt.Sprintf("spec.containers[%d].name: required; set it to one of the pod's containers", i))
		case seen[c.Name]:
			problems = append(problems, fmt.Sprintf("spec.containers[%d].name: duplicate container %q; list each container once", i, c.Name))
		}
		seen[c.Name] = true
	}
	if s := spec.Strategy; s != nil {
		switch s.FailurePolicy {
		case "", v1alpha1.ContainerRecreateRequestFailurePolicyFail, v1alpha1.ContainerRecreateRequestFailurePolicyIgnore:
		default:
			problems = append(problems, fmt.Sprintf("spec.strategy.failurePolicy: unsupported value %q; use %s or %s",
				s.FailurePolicy, v1alpha1.ContainerRecreateRequestFailurePolicyFail, v1alpha1.ContainerRecreateRequestFailurePolicyIgnore))
		}
		if v := s.TerminationGracePeriodSeconds; v != nil && *v < 0 {
			problems = append(problems, fmt.Sprintf("spec.strategy.terminationGracePeriodSeconds: must be 0 or more, got %d", *v))
		}
		if v := s.UnreadyGracePeriodSeconds; v != nil && *v < 0 {
			problems = append(problems, fmt.Sprintf("spec.strategy.unreadyGracePeriodSeconds: must be 0 or more, got %d", *v))
		}
		if s.MinStartedSeconds < 0 {
			problems = append(problems, fmt.Sprintf("spec.strategy.minStartedSeconds: must be 0 or more, got %d", s.MinStartedSeconds))
		}
	}
	if v := spec.ActiveDeadlineSeconds; v != nil && *v < crrMinActiveDeadlineSeconds {
		problems = append(problems, fmt.Sprintf("spec.activeDeadlineSeconds: must be at least %d seconds, got %d", crrMinActiveDeadlineSeconds, *v))
	}
	if v := spec.TTLSecondsAfterFinished; v != nil && *v < 0 {
		problems = append(problems, fmt.Sprintf("spec.ttlSecondsAfterFinished: must be 0 or more, got %d", *v))
	}
	return problems
}

// checkCRRPod says why pod's containers cannot be recreated, or "".
func checkCRRPod(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return fmt.Sprintf("spec.podName: pod %q is being deleted; its containers cannot be recreated, name a pod that is not terminating", pod.Name)
	case pod.Spec.NodeName == "":
		return fmt.Sprintf("spec.podName: pod %q is not scheduled to a node yet; create the request once the pod is running", pod.Name)
	case pod.Status.Phase == corev1.PodRunning || sidecarTerminated(pod):
		return ""
	case pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "":
		// As in OpenKruise: a scheduled, active pod may still be Pending
		// (a container in its postStart hook, say); the request is
		// accepted if every named container has a containerID, which
		// fillCRRContainers checks.
		return ""
	default:
		return fmt.Sprintf("spec.podName: pod %q is %s, not Running; only the containers of a running pod can be recreated", pod.Name, pod.Status.Phase)
	}
}

// sidecarTerminated reports whether the Job sidecar terminator has finished
// the pod itself, in which case its sidecars are still to be stopped
// through a request whatever the pod's phase.
func sidecarTerminated(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == wellknown.ConditionSidecarTerminated {
			return true
		}
	}
	return false
}

// fillCRRContainers checks each named container against the pod and sets
// its read-only fields from it. Containers with an empty or repeated name
// are skipped (checkCRRSpec reports them).
func fillCRRContainers(containers []v1alpha1.ContainerRecreateRequestContainer, pod *corev1.Pod) []string {
	var problems []string
	names := make([]string, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		names[i] = pod.Spec.Containers[i].Name
	}
	seen := make(map[string]bool, len(containers))
	for i := range containers {
		c := &containers[i]
		if c.Name == "" || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		podContainer := findContainer(pod.Spec.Containers, c.Name)
		if podContainer == nil {
			if findContainer(pod.Spec.InitContainers, c.Name) != nil {
				problems = append(problems, fmt.Sprintf("spec.containers[%d].name: %q is an init container of pod %q; only regular containers can be recreated (its containers: %s)",
					i, c.Name, pod.Name, strings.Join(names, ", ")))
			} else {
				problems = append(problems, fmt.Sprintf("spec.containers[%d].name: container %q is not in pod %q (its containers: %s)",
					i, c.Name, pod.Name, strings.Join(names, ", ")))
			}
			continue
		}
		var status *corev1.ContainerStatus
		for j := range pod.Status.ContainerStatuses {
			if pod.Status.ContainerStatuses[j].Name == c.Name {
				status = &pod.Status.ContainerStatuses[j]
				break
			}
		}
		if status == nil || status.ContainerID == "" {
			problems = append(problems, fmt.Sprintf("spec.containers[%d].name: container %q of pod %q is not initialized (no containerID in the pod's status); create the request once it has started",
				i, c.Name, pod.Name))
			continue
		}

		c.PreStop, c.Ports = nil, nil
		if lc := podContainer.Lifecycle; lc != nil && lc.PreStop != nil {
			if h := lc.PreStop; h.Exec != nil || h.HTTPGet != nil || h.TCPSocket != nil {
				c.PreStop = &v1alpha1.ProbeHandler{Exec: h.Exec.DeepCopy(), HTTPGet: h.HTTPGet.DeepCopy(), TCPSocket: h.TCPSocket.DeepCopy()}
			}
		}
		if c.PreStop != nil && c.PreStop.HTTPGet != nil && len(podContainer.Ports) > 0 {
			c.Ports = append([]corev1.ContainerPort(nil), podContainer.Ports...)
		}
		c.StatusContext = &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: status.ContainerID, RestartCount: status.RestartCount}
	}
	return problems
}

func findContainer(containers []corev1.Container, name string) *corev1.Container {
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	return nil
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// crrPatch returns the JSON patch that turns raw (the request's object,
// decoded as orig) into crr by replacing metadata.labels and spec as a
// whole, or nil when neither changed. "replace" is used for members raw
// has, "add" for the others.
func crrPatch(raw []byte, orig, crr *v1alpha1.ContainerRecreateRequest) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	opFor := func(m map[string]json.RawMessage, key string) string {
		if _, ok := m[key]; ok {
			return "replace"
		}
		return "add"
	}
	var ops []jsonPatchOp
	if !apiequality.Semantic.DeepEqual(orig.Labels, crr.Labels) {
		var meta map[string]json.RawMessage
		if rawMeta, ok := top["metadata"]; ok {
			if err := json.Unmarshal(rawMeta, &meta); err != nil {
				return nil, err
			}
		}
		if meta == nil { // no metadata, or "metadata": null
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata", Value: map[string]any{"labels": crr.Labels}})
		} else {
			ops = append(ops, jsonPatchOp{Op: opFor(meta, "labels"), Path: "/metadata/labels", Value: crr.Labels})
		}
	}
	if !apiequality.Semantic.DeepEqual(orig.Spec, crr.Spec) {
		ops = append(ops, jsonPatchOp{Op: opFor(top, "spec"), Path: "/spec", Value: crr.Spec})
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// badRequest denies an admission request whose object cannot be read.
func badRequest(message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: message,
	}}
}

// internalError denies an admission request the webhook could not decide.
func internalError(message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError, Message: message,
	}}
}
