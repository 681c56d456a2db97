// Package critest puts pods and containers shaped as kubelet creates them
// into the CRI fakes of k8s.io/cri-api/pkg/apis/testing, and wraps those
// fakes in a cri.Runtime, for tests of code that reads the node's runtime.
package critest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/shoal-io/shoal/cri"
)

// DefaultCreatedAt is the creation time given to sandboxes and containers
// that do not set one (the CRI client rejects statuses without it).
var DefaultCreatedAt = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Fake is a cri.Runtime backed by the cri-api fakes.
type Fake struct {
	// Runtime wraps RuntimeService and ImageService.
	Runtime *cri.Runtime
	// RuntimeService is the fake runtime service; tests may inject errors
	// and inspect calls through it.
	RuntimeService *apitest.FakeRuntimeService
	// ImageService is the fake image service.
	ImageService *apitest.FakeImageService
}

// New returns a Fake whose runtime reports the fake's name and version
// (apitest.FakeRuntimeName, apitest.FakeVersion). It fails tb if the
// Runtime cannot be built.
func New(tb testing.TB) *Fake {
	tb.Helper()
	rs := apitest.NewFakeRuntimeService()
	is := apitest.NewFakeImageService()
	rt, err := cri.NewRuntime(context.Background(), cri.Endpoint{Name: cri.RuntimeUnknown, Address: "unix:///fake/cri.sock"}, rs, is)
	if err != nil {
		tb.Fatalf("critest: build runtime over fakes: %v", err)
	}
	return &Fake{Runtime: rt, RuntimeService: rs, ImageService: is}
}

// Sandbox describes a pod sandbox as kubelet would create it.
type Sandbox struct {
	// ID is the sandbox id; AddSandbox derives one when empty.
	ID string
	// Namespace, Name and UID identify the pod.
	Namespace, Name, UID string
	// Attempt is the sandbox attempt.
	Attempt uint32
	// NotReady makes the sandbox NOTREADY (stopped) instead of READY.
	NotReady bool
	// CreatedAt is the sandbox creation time (DefaultCreatedAt when zero).
	CreatedAt time.Time
	// IP is the sandbox's primary IP; empty for host-network pods.
	IP string
	// PodLabels are the pod's labels, copied to the sandbox as kubelet does.
	PodLabels map[string]string
	// PodAnnotations are the pod's annotations, which kubelet makes the
	// sandbox's annotations.
	PodAnnotations map[string]string
}

// Container describes a container as kubelet would create it.
type Container struct {
	// ID is the container id; AddContainer derives one when empty.
	ID string
	// Name is the container's name in the pod spec.
	Name string
	// Attempt is both the CRI attempt and kubelet's restart count.
	Attempt uint32
	// State is the container's CRI state; the zero value is
	// CONTAINER_CREATED.
	State runtimeapi.ContainerState
	// Image, UserSpecifiedImage, ImageRef and ImageID describe the image.
	// Image defaults to "registry.example/NAME:latest" and ImageRef to
	// Image, since the CRI client rejects statuses without them.
	Image, UserSpecifiedImage, ImageRef, ImageID string
	// CreatedAt, StartedAt and FinishedAt are the container's times; a zero
	// CreatedAt becomes DefaultCreatedAt, the others stay unset.
	CreatedAt, StartedAt, FinishedAt time.Time
	// ExitCode is the exit code ContainerStatus reports.
	ExitCode int32
	// Reason is the runtime's reason for the state.
	Reason string
	// Type is the container type annotation (default
	// cri.ContainerTypeRegular).
	Type string
	// PreStop, when set, is encoded into the preStop annotation as kubelet
	// does.
	PreStop *corev1.LifecycleHandler
	// TerminationGracePeriodSeconds, when set, is written to the pod
	// termination grace period annotation.
	TerminationGracePeriodSeconds *int64
	// Annotations are added last and override the ones kubelet would write
	// (for example to plant a malformed annotation).
	Annotations map[string]string
}

// AddSandbox adds a sandbox to the fake runtime service and returns it with
// its id filled in.
func (f *Fake) AddSandbox(s Sandbox) Sandbox {
	if s.ID == "" {
		s.ID = fmt.Sprintf("sb-%s-%s-%d", s.Namespace, s.Name, s.Attempt)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = DefaultCreatedAt
	}
	labels := maps.Clone(s.PodLabels)
	if labels == nil {
		labels = make(map[string]string)
	}
	labels[cri.LabelPodName] = s.Name
	labels[cri.LabelPodNamespace] = s.Namespace
	labels[cri.LabelPodUID] = s.UID
	state := runtimeapi.PodSandboxState_SANDBOX_READY
	if s.NotReady {
		state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	var network *runtimeapi.PodSandboxNetworkStatus
	if s.IP != "" {
		network = &runtimeapi.PodSandboxNetworkStatus{Ip: s.IP}
	}
	f.RuntimeService.Lock()
	defer f.RuntimeService.Unlock()
	f.RuntimeService.Sandboxes[s.ID] = &apitest.FakePodSandbox{
		PodSandboxStatus: runtimeapi.PodSandboxStatus{
			Id: s.ID,
			Metadata: &runtimeapi.PodSandboxMetadata{
				Name: s.Name, Namespace: s.Namespace, Uid: s.UID, Attempt: s.Attempt,
			},
			State:       state,
			CreatedAt:   unixNanos(s.CreatedAt),
			Network:     network,
			Labels:      labels,
			Annotations: maps.Clone(s.PodAnnotations),
		},
	}
	return s
}

// AddContainer adds a container of sandbox sb to the fake runtime service,
// labelled and annotated as kubelet does, and returns it with its id filled
// in.
func (f *Fake) AddContainer(sb Sandbox, c Container) Container {
	if c.ID == "" {
		c.ID = fmt.Sprintf("c-%s-%s-%d", sb.ID, c.Name, c.Attempt)
	}
	if c.Type == "" {
		c.Type = cri.ContainerTypeRegular
	}
	if c.Image == "" {
		c.Image = "registry.example/" + c.Name + ":latest"
	}
	if c.ImageRef == "" {
		c.ImageRef = c.Image
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = DefaultCreatedAt
	}
	labels := map[string]string{
		cri.LabelPodName:       sb.Name,
		cri.LabelPodNamespace:  sb.Namespace,
		cri.LabelPodUID:        sb.UID,
		cri.LabelContainerName: c.Name,
	}
	annotations := map[string]string{
		cri.AnnotationContainerHash:                     "1a2b3c4d",
		cri.AnnotationContainerRestartCount:             strconv.FormatUint(uint64(c.Attempt), 10),
		cri.AnnotationContainerTerminationMessagePath:   "/dev/termination-log",
		cri.AnnotationContainerTerminationMessagePolicy: "File",
		cri.AnnotationContainerType:                     c.Type,
	}
	if c.TerminationGracePeriodSeconds != nil {
		annotations[cri.AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*c.TerminationGracePeriodSeconds, 10)
	}
	if c.PreStop != nil {
		raw, err := json.Marshal(c.PreStop)
		if err != nil {
			panic(fmt.Sprintf("critest: marshal preStop handler: %v", err))
		}
		annotations[cri.AnnotationContainerPreStopHandler] = string(raw)
	}
	maps.Copy(annotations, c.Annotations)
	f.RuntimeService.Lock()
	defer f.RuntimeService.Unlock()
	f.RuntimeService.Containers[c.ID] = &apitest.FakeContainer{
		ContainerStatus: runtimeapi.ContainerStatus{
			Id:          c.ID,
			Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: c.Attempt},
			State:       c.State,
			CreatedAt:   unixNanos(c.CreatedAt),
			StartedAt:   unixNanos(c.StartedAt),
			FinishedAt:  unixNanos(c.FinishedAt),
			ExitCode:    c.ExitCode,
			Image:       &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.UserSpecifiedImage},
			ImageRef:    c.ImageRef,
			ImageId:     c.ImageID,
			Reason:      c.Reason,
			Labels:      labels,
			Annotations: annotations,
		},
		SandboxID: sb.ID,
	}
	return c
}

// unixNanos converts a time to CRI's Unix nanoseconds, the zero time to 0.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
