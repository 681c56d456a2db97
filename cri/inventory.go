package cri

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// SandboxState is the state of a pod sandbox.
type SandboxState string

const (
	// SandboxReady means the sandbox is up: the pod is running on the node.
	SandboxReady SandboxState = "READY"
	// SandboxNotReady means the sandbox was stopped (or is broken).
	SandboxNotReady SandboxState = "NOTREADY"
)

// ContainerState is the state of a container as the CRI reports it.
type ContainerState string

const (
	// ContainerCreated means the container was created but not started.
	ContainerCreated ContainerState = "CREATED"
	// ContainerRunning means the container's process is running.
	ContainerRunning ContainerState = "RUNNING"
	// ContainerExited means the container's process has exited.
	ContainerExited ContainerState = "EXITED"
	// ContainerUnknown means the runtime does not know the state.
	ContainerUnknown ContainerState = "UNKNOWN"
)

// Inventory is what the node's runtime holds: the pods kubelet created
// there and their containers, read from the CRI alone. The agent serves it as
// JSON at GET /inventory.
type Inventory struct {
	// Pods has one entry per pod namespace/name, sorted by namespace then
	// name.
	Pods []Pod `json:"pods"`
	// Warnings lists runtime objects that could not be placed in a pod.
	Warnings []string `json:"warnings,omitempty"`
}

// Pod is one pod on the node, described by its latest sandbox.
type Pod struct {
	// Namespace is the pod's namespace.
	Namespace string `json:"namespace"`
	// Name is the pod's name.
	Name string `json:"name"`
	// UID is the pod's UID as recorded on its latest sandbox.
	UID string `json:"uid"`
	// SandboxID is the CRI id of the latest sandbox (by creation time).
	SandboxID string `json:"sandboxId"`
	// SandboxAttempt is the latest sandbox's attempt number; kubelet bumps it
	// each time it recreates the sandbox.
	SandboxAttempt uint32 `json:"sandboxAttempt"`
	// Sandboxes is how many sandboxes exist for this namespace/name,
	// including the latest one and any left by an earlier pod of the same
	// name.
	Sandboxes int `json:"sandboxes"`
	// State is the latest sandbox's state.
	State SandboxState `json:"state"`
	// IP is the sandbox's primary IP, empty for host-network pods and for
	// sandboxes without a network.
	IP string `json:"ip,omitempty"`
	// HostNetwork is true when the sandbox shares the node's network
	// namespace (the pod's IP is then the node's).
	HostNetwork bool `json:"hostNetwork,omitempty"`
	// AdditionalIPs are the sandbox's other IPs (dual stack).
	AdditionalIPs []string `json:"additionalIps,omitempty"`
	// CreatedAt is when the latest sandbox was created.
	CreatedAt time.Time `json:"createdAt"`
	// Labels are the pod's labels as kubelet copied them to the sandbox
	// (kubelet's own identity labels removed).
	Labels map[string]string `json:"labels,omitempty"`
	// TerminationGracePeriodSeconds is the pod's
	// spec.terminationGracePeriodSeconds, read from its containers'
	// annotations; nil when no container carries it.
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// Containers has the latest attempt of each container name of this pod
	// UID, sorted by name.
	Containers []Container `json:"containers"`
	// StaleContainers counts containers that carry this namespace/name but
	// another pod UID (left by a deleted pod of the same name); they are
	// not listed.
	StaleContainers int `json:"staleContainers,omitempty"`
	// Warnings says what could not be read about the pod itself.
	Warnings []string `json:"warnings,omitempty"`
}

// Container is the latest attempt of one container of a pod.
type Container struct {
	// Name is the container's name in the pod spec.
	Name string `json:"name"`
	// ID is the CRI container id.
	ID string `json:"id"`
	// SandboxID is the id of the sandbox the container belongs to; it may be
	// an older sandbox than the pod's latest.
	SandboxID string `json:"sandboxId"`
	// Attempt is the CRI metadata attempt; kubelet sets it to the restart
	// count at creation.
	Attempt uint32 `json:"attempt"`
	// OlderAttempts counts the other containers of the same name and pod UID
	// still held by the runtime (earlier attempts not yet garbage collected).
	OlderAttempts int `json:"olderAttempts"`
	// Type is ContainerTypeInit, ContainerTypeRegular, ContainerTypeEphemeral
	// or empty when kubelet did not record it.
	Type string `json:"type,omitempty"`
	// State is the container's state.
	State ContainerState `json:"state"`
	// Image is the image as the runtime records it in the container's image
	// spec (often the image id for containerd).
	Image string `json:"image"`
	// UserSpecifiedImage is the image as written in the pod spec, when the
	// runtime reports it.
	UserSpecifiedImage string `json:"userSpecifiedImage,omitempty"`
	// ImageRef is the runtime's reference to the image, usually a digest
	// reference (repo@sha256:...).
	ImageRef string `json:"imageRef"`
	// ImageID is the image id, when the runtime reports it.
	ImageID string `json:"imageId,omitempty"`
	// CreatedAt is when the container was created.
	CreatedAt time.Time `json:"createdAt"`
	// StartedAt is when the container started; nil if it never did or the
	// status could not be read.
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// FinishedAt is when the container exited; nil if it has not.
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// ExitCode is the exit code of an exited container.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Reason is the runtime's brief reason for the state (e.g. "Completed",
	// "OOMKilled", "Error").
	Reason string `json:"reason,omitempty"`
	// Message is the runtime's message about the state.
	Message string `json:"message,omitempty"`
	// RestartCount is kubelet's restart count for the container, from
	// AnnotationContainerRestartCount (0 when absent).
	RestartCount int `json:"restartCount"`
	// Hash is kubelet's hash of the container spec, from
	// AnnotationContainerHash.
	Hash string `json:"hash,omitempty"`
	// PreStop is the container's preStop handler, from
	// AnnotationContainerPreStopHandler; nil when there is none or it could
	// not be decoded (see Warnings).
	PreStop *corev1.LifecycleHandler `json:"preStop,omitempty"`
	// TerminationGracePeriodSeconds is the pod's grace period as recorded on
	// this container (AnnotationPodTerminationGracePeriod).
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// DeletionGracePeriodSeconds is the pod's deletion grace period if the
	// pod was being deleted when the container was created
	// (AnnotationPodDeletionGracePeriod).
	DeletionGracePeriodSeconds *int64 `json:"deletionGracePeriodSeconds,omitempty"`
	// Warnings says which annotations could not be decoded and which CRI
	// calls about the container failed. They do not stop the inventory.
	Warnings []string `json:"warnings,omitempty"`
}

// Running reports whether the pod's latest sandbox is ready.
func (p *Pod) Running() bool { return p.State == SandboxReady }

// Container returns the pod's container with the given name. It relies on
// Containers being sorted by name, as ReadInventory leaves them.
func (p *Pod) Container(name string) (*Container, bool) {
	i, ok := slices.BinarySearchFunc(p.Containers, name, func(c Container, n string) int {
		return cmp.Compare(c.Name, n)
	})
	if !ok {
		return nil, false
	}
	return &p.Containers[i], true
}

// Find returns the pod with the given namespace and name. It relies on
// Pods being sorted as ReadInventory leaves them. The pointer refers into
// inv.Pods.
func (inv Inventory) Find(namespace, name string) (*Pod, bool) {
	i, ok := slices.BinarySearchFunc(inv.Pods, podKey{namespace, name}, func(p Pod, k podKey) int {
		return comparePodKeys(podKey{p.Namespace, p.Name}, k)
	})
	if !ok {
		return nil, false
	}
	return &inv.Pods[i], true
}

// podKey identifies a pod on the node.
type podKey struct {
	namespace, name string
}

func comparePodKeys(a, b podKey) int {
	if c := cmp.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.name, b.name)
}

// sandboxIdentity is who a sandbox belongs to.
type sandboxIdentity struct {
	key podKey
	uid string
}

// ReadInventory lists every pod sandbox (ready or not) and every container
// the runtime holds and groups them by pod, using the metadata and the
// labels and annotations kubelet writes. Each pod is described by its latest
// sandbox (PodSandboxStatus supplies its IPs); each container name by its
// latest attempt (ContainerStatus supplies times, exit code and image id
// for running and exited ones). Annotations that do not decode and status
// calls that fail become warnings on the pod or container; only failing to
// list, or ctx ending, is an error.
func ReadInventory(ctx context.Context, rs internalapi.RuntimeService) (Inventory, error) {
	logger := klog.FromContext(ctx)
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		return Inventory{}, fmt.Errorf("list pod sandboxes: %w", err)
	}
	containers, err := rs.ListContainers(ctx, nil)
	if err != nil {
		return Inventory{}, fmt.Errorf("list containers: %w", err)
	}

	inv := Inventory{Pods: []Pod{}}

	// Group sandboxes by pod and pick the latest of each.
	bySandboxID := make(map[string]sandboxIdentity, len(sandboxes))
	latest := make(map[podKey]*runtimeapi.PodSandbox)
	counts := make(map[podKey]int)
	for _, sb := range sandboxes {
		id := sandboxIdentityOf(sb)
		if id.key.name == "" || id.key.namespace == "" {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("sandbox %s has no pod namespace/name in its labels or metadata; ignored", sb.GetId()))
			continue
		}
		bySandboxID[sb.GetId()] = id
		counts[id.key]++
		if cur, ok := latest[id.key]; !ok || newerSandbox(sb, cur) {
			latest[id.key] = sb
		}
	}

	// Group containers by pod.
	byPod := make(map[podKey][]*runtimeapi.Container)
	for _, c := range containers {
		key, ok := containerPodKey(c, bySandboxID)
		if !ok {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("container %s (sandbox %s) belongs to no known pod sandbox; ignored", c.GetId(), c.GetPodSandboxId()))
			continue
		}
		if _, ok := latest[key]; !ok {
			inv.Warnings = append(inv.Warnings, fmt.Sprintf("container %s belongs to pod %s/%s, which has no sandbox; ignored", c.GetId(), key.namespace, key.name))
			continue
		}
		byPod[key] = append(byPod[key], c)
	}

	for key, sb := range latest {
		if err := ctx.Err(); err != nil {
			return Inventory{}, fmt.Errorf("read inventory: %w", err)
		}
		pod := podFromSandbox(sb, bySandboxID[sb.GetId()], counts[key])
		if err := addSandboxStatus(ctx, rs, &pod); err != nil {
			return Inventory{}, err
		}
		if err := addContainers(ctx, rs, &pod, byPod[key], bySandboxID); err != nil {
			return Inventory{}, err
		}
		for _, w := range pod.Warnings {
			logger.V(2).Info("Pod inventory warning", "pod", klog.KRef(pod.Namespace, pod.Name), "warning", w)
		}
		inv.Pods = append(inv.Pods, pod)
	}
	slices.SortFunc(inv.Pods, func(a, b Pod) int {
		return comparePodKeys(podKey{a.Namespace, a.Name}, podKey{b.Namespace, b.Name})
	})
	slices.Sort(inv.Warnings)
	for _, w := range inv.Warnings {
		logger.V(2).Info("Inventory warning", "warning", w)
	}
	return inv, nil
}

// sandboxIdentityOf reads the pod identity from kubelet's labels, falling
// back to the sandbox metadata (which kubelet fills with the same values).
func sandboxIdentityOf(sb *runtimeapi.PodSandbox) sandboxIdentity {
	l := sb.GetLabels()
	md := sb.GetMetadata()
	return sandboxIdentity{
		key: podKey{
			namespace: firstNonEmpty(l[LabelPodNamespace], md.GetNamespace()),
			name:      firstNonEmpty(l[LabelPodName], md.GetName()),
		},
		uid: firstNonEmpty(l[LabelPodUID], md.GetUid()),
	}
}

// newerSandbox reports whether a is more recent than b: later creation,
// then higher attempt, then id (only to be deterministic).
func newerSandbox(a, b *runtimeapi.PodSandbox) bool {
	if c := cmp.Compare(a.GetCreatedAt(), b.GetCreatedAt()); c != 0 {
		return c > 0
	}
	if c := cmp.Compare(a.GetMetadata().GetAttempt(), b.GetMetadata().GetAttempt()); c != 0 {
		return c > 0
	}
	return a.GetId() > b.GetId()
}

// containerPodKey finds the pod of a container: through its sandbox when
// the sandbox is known, else through kubelet's labels on the container.
func containerPodKey(c *runtimeapi.Container, bySandboxID map[string]sandboxIdentity) (podKey, bool) {
	if id, ok := bySandboxID[c.GetPodSandboxId()]; ok {
		return id.key, true
	}
	l := c.GetLabels()
	key := podKey{namespace: l[LabelPodNamespace], name: l[LabelPodName]}
	return key, key.namespace != "" && key.name != ""
}

// containerUID is the pod UID a container belongs to.
func containerUID(c *runtimeapi.Container, bySandboxID map[string]sandboxIdentity) string {
	if uid := c.GetLabels()[LabelPodUID]; uid != "" {
		return uid
	}
	return bySandboxID[c.GetPodSandboxId()].uid
}

// podFromSandbox fills what the sandbox list tells about a pod.
func podFromSandbox(sb *runtimeapi.PodSandbox, id sandboxIdentity, count int) Pod {
	pod := Pod{
		Namespace:      id.key.namespace,
		Name:           id.key.name,
		UID:            id.uid,
		SandboxID:      sb.GetId(),
		SandboxAttempt: sb.GetMetadata().GetAttempt(),
		Sandboxes:      count,
		State:          sandboxState(sb.GetState()),
		CreatedAt:      nanosToTime(sb.GetCreatedAt()),
		Containers:     []Container{},
	}
	for k, v := range sb.GetLabels() {
		if k == LabelPodName || k == LabelPodNamespace || k == LabelPodUID {
			continue
		}
		if pod.Labels == nil {
			pod.Labels = make(map[string]string)
		}
		pod.Labels[k] = v
	}
	return pod
}

// addSandboxStatus adds the sandbox's IPs from PodSandboxStatus. A failed
// call is a warning unless ctx has ended.
func addSandboxStatus(ctx context.Context, rs internalapi.RuntimeService, pod *Pod) error {
	resp, err := rs.PodSandboxStatus(ctx, pod.SandboxID, false)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pod sandbox status of %s: %w", pod.SandboxID, err)
		}
		pod.Warnings = append(pod.Warnings, fmt.Sprintf("PodSandboxStatus %s: %v", pod.SandboxID, err))
		return nil
	}
	status := resp.GetStatus()
	if status == nil {
		pod.Warnings = append(pod.Warnings, fmt.Sprintf("PodSandboxStatus %s: empty status", pod.SandboxID))
		return nil
	}
	pod.State = sandboxState(status.GetState())
	pod.IP = status.GetNetwork().GetIp()
	pod.HostNetwork = status.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	for _, ip := range status.GetNetwork().GetAdditionalIps() {
		if ip.GetIp() != "" {
			pod.AdditionalIPs = append(pod.AdditionalIPs, ip.GetIp())
		}
	}
	return nil
}

// addContainers picks the latest attempt of each container name of the
// pod's UID, decodes kubelet's annotations and adds ContainerStatus details.
func addContainers(ctx context.Context, rs internalapi.RuntimeService, pod *Pod, cs []*runtimeapi.Container, bySandboxID map[string]sandboxIdentity) error {
	own := make([]*runtimeapi.Container, 0, len(cs))
	for _, c := range cs {
		if uid := containerUID(c, bySandboxID); pod.UID != "" && uid != "" && uid != pod.UID {
			pod.StaleContainers++
			continue
		}
		own = append(own, c)
	}
	latest, warnings, err := latestAttempts(ctx, rs, own)
	if err != nil {
		return err
	}
	pod.Containers = append(pod.Containers, latest...)
	pod.Warnings = append(pod.Warnings, warnings...)
	for _, c := range pod.Containers {
		if c.TerminationGracePeriodSeconds != nil {
			v := *c.TerminationGracePeriodSeconds
			pod.TerminationGracePeriodSeconds = &v
			break
		}
	}
	return nil
}

// latestAttempts groups the containers of one pod by name and returns the
// latest attempt of each, sorted by name, with kubelet's annotations decoded
// and ContainerStatus details added to running and exited ones. Containers
// without a name become warnings; only ctx ending is an error.
func latestAttempts(ctx context.Context, rs internalapi.RuntimeService, cs []*runtimeapi.Container) ([]Container, []string, error) {
	var warnings []string
	byName := make(map[string][]*runtimeapi.Container)
	for _, c := range cs {
		name := firstNonEmpty(c.GetMetadata().GetName(), c.GetLabels()[LabelContainerName])
		if name == "" {
			warnings = append(warnings, fmt.Sprintf("container %s has no name in its metadata or labels; ignored", c.GetId()))
			continue
		}
		byName[name] = append(byName[name], c)
	}
	out := make([]Container, 0, len(byName))
	for name, group := range byName {
		newest := slices.MaxFunc(group, compareContainers)
		c := containerFromCRI(name, newest)
		c.OlderAttempts = len(group) - 1
		if c.State == ContainerRunning || c.State == ContainerExited {
			if err := addContainerStatus(ctx, rs, &c); err != nil {
				return nil, nil, err
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Container) int { return cmp.Compare(a.Name, b.Name) })
	return out, warnings, nil
}

// compareContainers orders attempts of one container: by attempt, then
// creation time, then id (only to be deterministic).
func compareContainers(a, b *runtimeapi.Container) int {
	if c := cmp.Compare(a.GetMetadata().GetAttempt(), b.GetMetadata().GetAttempt()); c != 0 {
		return c
	}
	if c := cmp.Compare(a.GetCreatedAt(), b.GetCreatedAt()); c != 0 {
		return c
	}
	return cmp.Compare(a.GetId(), b.GetId())
}

// containerFromCRI fills what the container list tells, and decodes
// kubelet's annotations.
func containerFromCRI(name string, c *runtimeapi.Container) Container {
	out := Container{
		Name:               name,
		ID:                 c.GetId(),
		SandboxID:          c.GetPodSandboxId(),
		Attempt:            c.GetMetadata().GetAttempt(),
		State:              containerState(c.GetState()),
		Image:              c.GetImage().GetImage(),
		UserSpecifiedImage: c.GetImage().GetUserSpecifiedImage(),
		ImageRef:           c.GetImageRef(),
		ImageID:            c.GetImageId(),
		CreatedAt:          nanosToTime(c.GetCreatedAt()),
	}
	a := c.GetAnnotations()
	out.Type = a[AnnotationContainerType]
	out.Hash = a[AnnotationContainerHash]
	if v, ok := a[AnnotationContainerRestartCount]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			out.Warnings = append(out.Warnings, fmt.Sprintf("annotation %s: %v", AnnotationContainerRestartCount, err))
		} else {
			out.RestartCount = n
		}
	}
	out.TerminationGracePeriodSeconds = int64Annotation(a, AnnotationPodTerminationGracePeriod, &out.Warnings)
	out.DeletionGracePeriodSeconds = int64Annotation(a, AnnotationPodDeletionGracePeriod, &out.Warnings)
	if v, ok := a[AnnotationContainerPreStopHandler]; ok {
		h := &corev1.LifecycleHandler{}
		if err := json.Unmarshal([]byte(v), h); err != nil {
			out.Warnings = append(out.Warnings, fmt.Sprintf("annotation %s: invalid JSON: %v", AnnotationContainerPreStopHandler, err))
		} else {
			out.PreStop = h
		}
	}
	return out
}

// int64Annotation parses an optional decimal annotation, recording a
// warning when it does not parse.
func int64Annotation(a map[string]string, key string, warnings *[]string) *int64 {
	v, ok := a[key]
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		*warnings = append(*warnings, fmt.Sprintf("annotation %s: %v", key, err))
		return nil
	}
	return &n
}

// addContainerStatus adds times, exit code and image id from
// ContainerStatus. A failed call is a warning unless ctx has ended.
func addContainerStatus(ctx context.Context, rs internalapi.RuntimeService, c *Container) error {
	resp, err := rs.ContainerStatus(ctx, c.ID, false)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("container status of %s: %w", c.ID, err)
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("ContainerStatus %s: %v", c.ID, err))
		return nil
	}
	st := resp.GetStatus()
	if st == nil {
		c.Warnings = append(c.Warnings, fmt.Sprintf("ContainerStatus %s: empty status", c.ID))
		return nil
	}
	c.State = containerState(st.GetState())
	if t := st.GetStartedAt(); t != 0 {
		ts := nanosToTime(t)
		c.StartedAt = &ts
	}
	if t := st.GetFinishedAt(); t != 0 {
		ts := nanosToTime(t)
		c.FinishedAt = &ts
	}
	if c.State == ContainerExited {
		code := st.GetExitCode()
		c.ExitCode = &code
	}
	c.Reason = st.GetReason()
	c.Message = st.GetMessage()
	if id := st.GetImageId(); id != "" {
		c.ImageID = id
	}
	if ref := st.GetImageRef(); ref != "" {
		c.ImageRef = ref
	}
	if img := st.GetImage(); img != nil {
		if c.Image == "" {
			c.Image = img.GetImage()
		}
		if c.UserSpecifiedImage == "" {
			c.UserSpecifiedImage = img.GetUserSpecifiedImage()
		}
	}
	return nil
}

func sandboxState(s runtimeapi.PodSandboxState) SandboxState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return SandboxReady
	}
	return SandboxNotReady
}

func containerState(s runtimeapi.ContainerState) ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerExited
	default:
		return ContainerUnknown
	}
}

// nanosToTime converts CRI's Unix nanoseconds to UTC time; 0 stays the zero
// time.
func nanosToTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
