// Package probestest has fakes for tests of code that runs probes: Runtime,
// an in-memory probes.Runtime; Network, an in-memory TCP network for TCP
// and HTTP probes (usable inside testing/synctest bubbles); and
// RuntimeConformance, the suite every probes.Runtime must pass.
package probestest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shoal-io/shoal/probes"
)

// ExecFunc answers an ExecSync call of a Runtime.
type ExecFunc func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error)

// ExecCall is an ExecSync call a Runtime received.
type ExecCall struct {
	// ContainerID, Cmd and Timeout are the call's arguments.
	ContainerID string
	Cmd         []string
	Timeout     time.Duration
	// At is when the call was made (time.Now: the bubble's clock inside a
	// synctest bubble).
	At time.Time
}

// Runtime is a probes.Runtime held in memory: containers by pod UID and
// name, set by the test, and ExecSync answered by a hook (default: exit 0,
// no output). Safe for concurrent use.
type Runtime struct {
	mu         sync.Mutex
	containers map[podContainer]probes.Container
	lookupErr  error
	exec       ExecFunc
	calls      []ExecCall
	lookups    int
}

type podContainer struct{ podUID, name string }

var _ probes.Runtime = (*Runtime)(nil)

// NewRuntime returns an empty Runtime.
func NewRuntime() *Runtime {
	return &Runtime{containers: map[podContainer]probes.Container{}}
}

// Set makes c the latest attempt of container name of pod podUID.
func (f *Runtime) Set(podUID, name string, c probes.Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[podContainer{podUID, name}] = c
}

// Start makes a running container with id id, started at startedAt, the
// latest attempt of container name of pod podUID (a restart when id is
// new).
func (f *Runtime) Start(podUID, name, id string, startedAt time.Time) {
	f.Set(podUID, name, probes.Container{ID: id, Running: true, StartedAt: startedAt})
}

// Exit marks the latest attempt of container name of pod podUID as no
// longer running, and panics if there is none.
func (f *Runtime) Exit(podUID, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := podContainer{podUID, name}
	c, ok := f.containers[k]
	if !ok {
		panic(fmt.Sprintf("probestest: exit unknown container %q of pod %q", name, podUID))
	}
	c.Running = false
	f.containers[k] = c
}

// Remove removes container name of pod podUID.
func (f *Runtime) Remove(podUID, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.containers, podContainer{podUID, name})
}

// FailLookups makes every later ContainerOf call return err (nil restores
// normal answers).
func (f *Runtime) FailLookups(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookupErr = err
}

// OnExec makes fn answer every later ExecSync call (nil restores the
// default: exit 0, no output).
func (f *Runtime) OnExec(fn ExecFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exec = fn
}

// ExecCalls returns the ExecSync calls received so far, in order.
func (f *Runtime) ExecCalls() []ExecCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Lookups counts the ContainerOf calls received so far.
func (f *Runtime) Lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups
}

// ContainerOf implements probes.Runtime.
func (f *Runtime) ContainerOf(_ context.Context, podUID, container string) (probes.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	if f.lookupErr != nil {
		return probes.Container{}, f.lookupErr
	}
	c, ok := f.containers[podContainer{podUID, container}]
	if !ok {
		return probes.Container{}, fmt.Errorf("container %q of pod %s: %w", container, podUID, probes.ErrContainerNotFound)
	}
	return c, nil
}

// ExecSync implements probes.Runtime: it records the call and answers it
// with the OnExec hook.
func (f *Runtime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
	f.mu.Lock()
	f.calls = append(f.calls, ExecCall{ContainerID: containerID, Cmd: slices.Clone(cmd), Timeout: timeout, At: time.Now()})
	fn := f.exec
	f.mu.Unlock()
	if fn == nil {
		return nil, nil, 0, nil
	}
	return fn(ctx, containerID, cmd, timeout)
}

// Exec returns an ExecFunc that always answers with the given output and
// exit code.
func Exec(stdout, stderr string, exitCode int32) ExecFunc {
	return func(context.Context, string, []string, time.Duration) ([]byte, []byte, int32, error) {
		return []byte(stdout), []byte(stderr), exitCode, nil
	}
}

// ExecError returns an ExecFunc that always fails with err.
func ExecError(err error) ExecFunc {
	return func(context.Context, string, []string, time.Duration) ([]byte, []byte, int32, error) {
		return nil, nil, 0, err
	}
}
