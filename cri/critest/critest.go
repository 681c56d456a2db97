// Package critest puts pods and containers shaped as kubelet creates them
// into the CRI fakes of k8s.io/cri-api/pkg/apis/testing, and wraps those
// fakes in a cri.Runtime, for tests of code that reads the node's runtime.
package critest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/shoal-io/shoal/cri"
)

// DefaultCreatedAt is the creation time given to sandboxes and containers
// that do not set one (the CRI client rejects statuses without it).
var DefaultCreatedAt = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Fake is a cri.Runtime backed by the cri-api fakes.
type Fake struct {
	// Runtime wraps RuntimeService and ImageService. Built by NewHooked,
	// it also records StopContainer and ExecSync calls (Calls) and
	// PullImage calls (PullCalls), and runs the hooks set with OnExec,
	// OnStop and OnPull.
	Runtime *cri.Runtime
	// RuntimeService is the fake runtime service; tests may inject errors
	// and inspect calls through it.
	RuntimeService *apitest.FakeRuntimeService
	// ImageService is the fake image service.
	ImageService *apitest.FakeImageService

	mu          sync.Mutex
	calls       []Call
	exec        ExecFunc
	afterStop   func(id string)
	env         func(name string, attempt uint32) []string
	pull        PullFunc
	pullCalls   []PullCall
	pullsNow    int
	pullsMaxNow int
	// events feeds the container event stream of a hooked fake: Restart
	// and SetState put their events here (dropped when it is full, as a
	// runtime drops events no one reads).
	events chan *runtimeapi.ContainerEventResponse
}

// Call is a StopContainer or ExecSync call received through the Runtime of
// a Fake built by NewHooked.
type Call struct {
	// Method is "StopContainer" or "ExecSync".
	Method string
	// ContainerID is the CRI container id the call was about.
	ContainerID string
	// Timeout is the timeout as the call passed it (StopContainer's whole
	// seconds as a duration).
	Timeout time.Duration
	// Cmd is the command of an ExecSync call.
	Cmd []string
}

// ExecFunc answers an ExecSync call in place of the fake runtime service.
// To report a non-zero exit code, return a k8s.io/utils/exec.CodeExitError,
// as the CRI client does.
type ExecFunc func(ctx context.Context, id string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)

// New returns a Fake whose runtime reports the fake's name and version
// (apitest.FakeRuntimeName, apitest.FakeVersion) and whose
// Runtime.RuntimeService() is RuntimeService itself. It fails tb if the
// Runtime cannot be built.
func New(tb testing.TB) *Fake {
	tb.Helper()
	f := &Fake{RuntimeService: apitest.NewFakeRuntimeService(), ImageService: apitest.NewFakeImageService()}
	f.Runtime = newRuntime(tb, f.RuntimeService, f.ImageService)
	return f
}

// NewHooked returns a Fake like New, except that its Runtime goes through
// wrappers of RuntimeService and ImageService that record StopContainer
// and ExecSync calls (Calls, StopCalls, ExecCalls) and PullImage calls
// (PullCalls, PullsRunning, MaxPullsRunning), and run the hooks set with
// OnExec, OnStop and OnPull. Its runtime streams container events
// (GetContainerEvents) for the changes Restart and SetState make.
func NewHooked(tb testing.TB) *Fake {
	tb.Helper()
	f := &Fake{RuntimeService: apitest.NewFakeRuntimeService(), ImageService: apitest.NewFakeImageService(),
		events: make(chan *runtimeapi.ContainerEventResponse, 256)}
	f.Runtime = newRuntime(tb, &hookedRuntime{FakeRuntimeService: f.RuntimeService, f: f}, &hookedImages{FakeImageService: f.ImageService, f: f})
	return f
}

func newRuntime(tb testing.TB, rs internalapi.RuntimeService, is internalapi.ImageManagerService) *cri.Runtime {
	tb.Helper()
	rt, err := cri.NewRuntime(context.Background(), cri.Endpoint{Name: cri.RuntimeUnknown, Address: "unix:///fake/cri.sock"}, rs, is)
	if err != nil {
		tb.Fatalf("critest: build runtime over fakes: %v", err)
	}
	return rt
}

// hookedRuntime is the fake runtime service with StopContainer and
// ExecSync recorded and hookable.
type hookedRuntime struct {
	*apitest.FakeRuntimeService
	f *Fake
}

// StopContainer records the call, stops the container in the fake and then
// runs the OnStop hook.
func (h *hookedRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	h.f.record(Call{Method: "StopContainer", ContainerID: id, Timeout: time.Duration(timeout) * time.Second})
	if err := h.FakeRuntimeService.StopContainer(ctx, id, timeout); err != nil {
		return err
	}
	h.f.mu.Lock()
	after := h.f.afterStop
	h.f.mu.Unlock()
	if after != nil {
		after(id)
	}
	return nil
}

// ExecSync records the call and answers it with the OnExec hook, or else
// with the fake runtime service (empty output, or an injected error).
func (h *hookedRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	h.f.record(Call{Method: "ExecSync", ContainerID: id, Timeout: timeout, Cmd: slices.Clone(cmd)})
	h.f.mu.Lock()
	exec := h.f.exec
	h.f.mu.Unlock()
	if exec != nil {
		return exec(ctx, id, cmd, timeout)
	}
	return h.FakeRuntimeService.ExecSync(ctx, id, cmd, timeout)
}

// ContainerStatus answers as the fake runtime service does and, when
// verbose and an OnEnv hook is set, adds the verbose info a containerd
// runtime gives: the container's OCI spec with the hook's process env.
func (h *hookedRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := h.FakeRuntimeService.ContainerStatus(ctx, id, verbose)
	if err != nil || !verbose {
		return resp, err
	}
	h.f.mu.Lock()
	envOf := h.f.env
	h.f.mu.Unlock()
	if envOf == nil {
		return resp, nil
	}
	md := resp.GetStatus().GetMetadata()
	raw, err := json.Marshal(map[string]any{"runtimeSpec": map[string]any{"process": map[string]any{"env": envOf(md.GetName(), md.GetAttempt())}}})
	if err != nil {
		return nil, err
	}
	resp.Info = map[string]string{"info": string(raw)}
	return resp, nil
}

// GetContainerEvents streams the fake's events (see NewHooked) until ctx
// ends, as a runtime's stream does.
func (h *hookedRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if established != nil {
		established(nil)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-h.f.events:
			select {
			case ch <- ev:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// emit queues an event about container c for the event stream of a
// hooked fake. The caller holds the runtime service's lock.
func (f *Fake) emit(c *apitest.FakeContainer, typ runtimeapi.ContainerEventType) {
	if f.events == nil {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{ContainerId: c.Id, ContainerEventType: typ, CreatedAt: time.Now().UnixNano()}
	if sb, ok := f.RuntimeService.Sandboxes[c.SandboxID]; ok {
		ev.PodSandboxStatus = &runtimeapi.PodSandboxStatus{Id: sb.Id, Metadata: proto.Clone(sb.GetMetadata()).(*runtimeapi.PodSandboxMetadata)}
	}
	select {
	case f.events <- ev:
	default:
	}
}

// PullCall is a PullImage call received through the Runtime of a Fake
// built by NewHooked.
type PullCall struct {
	// Image is the requested image (ImageSpec.image).
	Image string
	// Auth is the call's credentials, nil when anonymous.
	Auth *runtimeapi.AuthConfig
	// Sandbox is the call's sandbox config.
	Sandbox *runtimeapi.PodSandboxConfig
}

// PullFunc runs before the fake image service handles a PullImage call:
// an error fails the call, nil lets the fake pull the image (it is then
// present, with the image name as its id). It may block, until ctx ends
// for example.
type PullFunc func(ctx context.Context, c PullCall) error

// hookedImages is the fake image service with PullImage recorded and
// hookable.
type hookedImages struct {
	*apitest.FakeImageService
	f *Fake
}

// PullImage records the call, runs the OnPull hook and then, unless the
// hook failed it, the fake image service's PullImage.
func (h *hookedImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	c := PullCall{Image: image.GetImage()}
	if auth != nil {
		c.Auth = proto.Clone(auth).(*runtimeapi.AuthConfig)
	}
	if sandbox != nil {
		c.Sandbox = proto.Clone(sandbox).(*runtimeapi.PodSandboxConfig)
	}
	h.f.mu.Lock()
	h.f.pullCalls = append(h.f.pullCalls, c)
	h.f.pullsNow++
	h.f.pullsMaxNow = max(h.f.pullsMaxNow, h.f.pullsNow)
	hook := h.f.pull
	h.f.mu.Unlock()
	defer func() {
		h.f.mu.Lock()
		h.f.pullsNow--
		h.f.mu.Unlock()
	}()
	if hook != nil {
		if err := hook(ctx, c); err != nil {
			return "", err
		}
	}
	return h.FakeImageService.PullImage(ctx, image, auth, sandbox)
}

// OnPull makes fn run before every later PullImage call (nil removes it).
// Only a Fake built by NewHooked runs it.
func (f *Fake) OnPull(fn PullFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pull = fn
}

// PullCalls returns the PullImage calls received so far, in order.
func (f *Fake) PullCalls() []PullCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pullCalls)
}

// PullsRunning counts the PullImage calls under way now.
func (f *Fake) PullsRunning() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pullsNow
}

// MaxPullsRunning is the most PullImage calls that were under way at once.
func (f *Fake) MaxPullsRunning() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pullsMaxNow
}

func (f *Fake) record(c Call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// Calls returns the StopContainer and ExecSync calls received so far, in
// order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// StopCalls returns the StopContainer calls received so far, in order.
func (f *Fake) StopCalls() []Call { return f.callsOf("StopContainer") }

// ExecCalls returns the ExecSync calls received so far, in order.
func (f *Fake) ExecCalls() []Call { return f.callsOf("ExecSync") }

func (f *Fake) callsOf(method string) []Call {
	var out []Call
	for _, c := range f.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// CallCount counts the calls of a CRI method (e.g. "ListContainers") the
// fake runtime service received; tests use it to wait for a number of
// polls.
func (f *Fake) CallCount(method string) int {
	n := 0
	for _, c := range f.RuntimeService.GetCalls() {
		if c == method {
			n++
		}
	}
	return n
}

// OnExec makes fn answer every later ExecSync call (nil restores the
// default). Only a Fake built by NewHooked runs it.
func (f *Fake) OnExec(fn ExecFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exec = fn
}

// OnEnv makes a verbose ContainerStatus report fn(name, attempt) as the
// container's process env ("KEY=VALUE" entries), the way containerd puts
// the OCI spec in its verbose info (nil removes it: no verbose info).
// Only a Fake built by NewHooked uses it.
func (f *Fake) OnEnv(fn func(name string, attempt uint32) []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.env = fn
}

// OnStop makes fn run after every later successful StopContainer call, with
// the stopped container's id (nil removes it). Only a Fake built by
// NewHooked runs it.
func (f *Fake) OnStop(fn func(id string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.afterStop = fn
}

// RestartOnStop plays the kubelet restarting a container as soon as it is
// stopped: every later successful StopContainer is followed by Restart(id,
// CONTAINER_RUNNING).
func (f *Fake) RestartOnStop() {
	f.OnStop(func(id string) { f.Restart(id, runtimeapi.ContainerState_CONTAINER_RUNNING) })
}

// Restart plays the kubelet replacing container id with its next attempt:
// the old container is marked exited (if it is not already) and a copy with
// attempt and restart count one higher is added in the given state (created
// now, and started now if running). A hooked fake streams the events of
// both changes. It returns the new container's id, and panics if id is not
// in the fake.
func (f *Fake) Restart(id string, state runtimeapi.ContainerState) string {
	now := time.Now()
	f.RuntimeService.Lock()
	defer f.RuntimeService.Unlock()
	old, ok := f.RuntimeService.Containers[id]
	if !ok {
		panic(fmt.Sprintf("critest: restart unknown container %q", id))
	}
	if old.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		old.State = runtimeapi.ContainerState_CONTAINER_EXITED
		old.FinishedAt = now.UnixNano()
		f.emit(old, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
	name := old.GetMetadata().GetName()
	attempt := old.GetMetadata().GetAttempt() + 1
	newID := fmt.Sprintf("c-%s-%s-%d", old.SandboxID, name, attempt)
	for n := 2; f.RuntimeService.Containers[newID] != nil; n++ {
		newID = fmt.Sprintf("c-%s-%s-%d-%d", old.SandboxID, name, attempt, n)
	}
	annotations := maps.Clone(old.GetAnnotations())
	annotations[cri.AnnotationContainerRestartCount] = strconv.FormatUint(uint64(attempt), 10)
	var startedAt int64
	if state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		startedAt = now.UnixNano()
	}
	f.RuntimeService.Containers[newID] = &apitest.FakeContainer{
		ContainerStatus: runtimeapi.ContainerStatus{
			Id:          newID,
			Metadata:    &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
			State:       state,
			CreatedAt:   now.UnixNano(),
			StartedAt:   startedAt,
			Image:       proto.Clone(old.GetImage()).(*runtimeapi.ImageSpec),
			ImageRef:    old.GetImageRef(),
			ImageId:     old.GetImageId(),
			Labels:      maps.Clone(old.GetLabels()),
			Annotations: annotations,
		},
		SandboxID: old.SandboxID,
	}
	typ := runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	if state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		typ = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	}
	f.emit(f.RuntimeService.Containers[newID], typ)
	return newID
}

// SetState sets the state of container id in the fake (a start time when
// it becomes running, a finish time when it exits; and for a hooked fake,
// a started or stopped event), and panics if id is not in the fake.
func (f *Fake) SetState(id string, state runtimeapi.ContainerState) {
	now := time.Now().UnixNano()
	f.RuntimeService.Lock()
	defer f.RuntimeService.Unlock()
	c, ok := f.RuntimeService.Containers[id]
	if !ok {
		panic(fmt.Sprintf("critest: set state of unknown container %q", id))
	}
	c.State = state
	switch state {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		if c.StartedAt == 0 {
			c.StartedAt = now
		}
		f.emit(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		if c.FinishedAt == 0 {
			c.FinishedAt = now
		}
		f.emit(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
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
