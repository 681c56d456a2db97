package probes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	remote "k8s.io/cri-client/pkg"

	"github.com/shoal-io/shoal/cri"
)

// CRIRuntime is the Runtime of the node's CRI runtime. get returns the
// runtime, or an error while there is none (the agent reconnects it); the
// probes then keep their state until it is back.
//
// ContainerOf finds the latest attempt of the container by the pod-UID and
// container-name labels kubelet puts on its containers
// (cri.Runtime.LatestContainer). ExecSync runs through cri.Runtime.ExecSync:
// a non-zero exit is an exit code, not an error, and the CRI client's
// timeout (or a gRPC DeadlineExceeded) becomes ErrExecTimeout.
//
// A full lookup is two CRI calls (list, then status), which cost tcp and
// http probes most of their CPU (make bench-probecost), so ContainerOf
// remembers the container it found: with events (the agent's cri.Events)
// and the stream open, it answers from memory while no event came for the
// pod; without, it checks the remembered container against the node's
// list of running containers, one ListContainers shared by every probe
// and at most runningMaxAge old. A restart is a new container, and an
// exited one leaves that list, so either is seen within that time.
func CRIRuntime(get func() (*cri.Runtime, error), events *cri.Events) Runtime {
	return newCRIRuntime(get, events, time.Now)
}

func newCRIRuntime(get func() (*cri.Runtime, error), events *cri.Events, clock func() time.Time) *criRuntime {
	return &criRuntime{get: get, events: events, clock: clock, cache: map[cacheKey]cachedContainer{}}
}

const (
	// lookupMaxAge bounds how long a cached container lookup is trusted
	// even when no event came (a lost event is then noticed this late at
	// worst).
	lookupMaxAge = time.Minute
	// runningMaxAge is how old the node's list of running containers may
	// be when a probe trusts it. The kubelet's own prober reads container
	// states from its PLEG relist, which is a second old at worst too.
	runningMaxAge = time.Second
)

type criRuntime struct {
	get    func() (*cri.Runtime, error)
	events *cri.Events
	clock  func() time.Time

	mu    sync.Mutex
	cache map[cacheKey]cachedContainer

	// runMu guards the running list. One probe refreshes it (refreshing
	// is closed when it is done) while the others wait for that answer,
	// each no longer than its own context allows.
	runMu      sync.Mutex
	running    map[string]struct{}
	runAt      time.Time
	refreshing chan struct{}
}

type cacheKey struct{ podUID, container string }

// cachedContainer is a lookup's answer, the events token taken before it,
// and when it was made.
type cachedContainer struct {
	c     Container
	token [2]uint64
	at    time.Time
}

// ContainerOf implements Runtime. A container it found running before is
// trusted without a call while the runtime's event stream (when there is
// one) shows no change of the pod, and otherwise while its ID is in the
// node's running list (runningIDs); it is looked up in full when that
// fails, and at least every lookupMaxAge.
func (c *criRuntime) ContainerOf(ctx context.Context, podUID, container string) (Container, error) {
	key := cacheKey{podUID, container}
	var token [2]uint64
	connected := false
	if c.events != nil {
		token, connected = c.events.Token(podUID)
	}
	now := c.clock()
	c.mu.Lock()
	hit, ok := c.cache[key]
	c.mu.Unlock()
	if ok && now.Sub(hit.at) < lookupMaxAge && hit.c.Running {
		if connected && hit.token == token {
			return hit.c, nil
		}
		if running, err := c.runningIDs(ctx, hit.at); err == nil {
			if _, ok := running[hit.c.ID]; ok {
				return hit.c, nil
			}
		}
	}
	got, err := c.lookup(ctx, podUID, container)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.cache, key)
		return got, err
	}
	for k, v := range c.cache { // drop what nobody asked for lately
		if now.Sub(v.at) >= lookupMaxAge {
			delete(c.cache, k)
		}
	}
	c.cache[key] = cachedContainer{c: got, token: token, at: now}
	return got, nil
}

// runningIDs returns the node's running containers, listed at most
// runningMaxAge ago and not before since (a list older than the lookup it
// checks could miss a container started just before that lookup). One
// caller lists them; the others wait for its answer, or for their context.
func (c *criRuntime) runningIDs(ctx context.Context, since time.Time) (map[string]struct{}, error) {
	for {
		c.runMu.Lock()
		now := c.clock()
		if c.running != nil && now.Sub(c.runAt) < runningMaxAge && !c.runAt.Before(since) {
			ids := c.running
			c.runMu.Unlock()
			return ids, nil
		}
		if wait := c.refreshing; wait != nil {
			c.runMu.Unlock()
			select {
			case <-wait:
				continue // look at what it found
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.refreshing = done
		c.runMu.Unlock()

		ids, err := c.listRunning(ctx)
		c.runMu.Lock()
		c.refreshing = nil
		if err == nil {
			c.running, c.runAt = ids, now
		}
		c.runMu.Unlock()
		close(done)
		return ids, err
	}
}

// listRunning asks the runtime for its running containers.
func (c *criRuntime) listRunning(ctx context.Context) (map[string]struct{}, error) {
	rt, err := c.get()
	if err != nil {
		return nil, err
	}
	return rt.RunningContainerIDs(ctx)
}

// lookup reads the container from the runtime.
func (c *criRuntime) lookup(ctx context.Context, podUID, container string) (Container, error) {
	rt, err := c.get()
	if err != nil {
		return Container{}, fmt.Errorf("container %q of pod %s: no container runtime: %w", container, podUID, err)
	}
	ct, found, err := rt.LatestContainer(ctx, podUID, container)
	if err != nil {
		return Container{}, err
	}
	if !found {
		return Container{}, fmt.Errorf("container %q of pod %s: %w", container, podUID, ErrContainerNotFound)
	}
	out := Container{ID: ct.ID, Running: ct.State == cri.ContainerRunning}
	if ct.StartedAt != nil {
		out.StartedAt = *ct.StartedAt
	}
	if out.Running && out.StartedAt.IsZero() {
		return Container{}, fmt.Errorf("container %s (%q of pod %s) is running but the runtime reports no start time", ct.ID, container, podUID)
	}
	return out, nil
}

// ExecSync implements Runtime.
func (c *criRuntime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
	rt, err := c.get()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("exec in container %s: no container runtime: %w", containerID, err)
	}
	stdout, stderr, code, err := rt.ExecSync(ctx, containerID, cmd, timeout)
	if err != nil && isTimeout(err) {
		err = fmt.Errorf("%w: %w", ErrExecTimeout, err)
	}
	return stdout, stderr, code, err
}

// isTimeout reports whether an ExecSync error says the command ran out of
// time: the CRI client's ErrCommandTimedOut, or the DeadlineExceeded it
// derives it from.
func isTimeout(err error) bool {
	if errors.Is(err, remote.ErrCommandTimedOut) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.DeadlineExceeded {
		return true
	}
	return false
}
