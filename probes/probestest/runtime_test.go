package probestest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoal-io/shoal/probes"
	"github.com/shoal-io/shoal/probes/probestest"
)

// fakeHarness drives a probestest.Runtime through the conformance suite.
type fakeHarness struct {
	rt   *probestest.Runtime
	n    int
	byID map[string][2]string // id -> pod UID, name
}

func (h *fakeHarness) Runtime() probes.Runtime { return h.rt }

func (h *fakeHarness) newID(podUID, name string) string {
	h.n++
	id := fmt.Sprintf("c%d", h.n)
	h.byID[id] = [2]string{podUID, name}
	return id
}

func (h *fakeHarness) AddRunning(podUID, name string, startedAt time.Time) string {
	id := h.newID(podUID, name)
	h.rt.Start(podUID, name, id, startedAt)
	return id
}

func (h *fakeHarness) AddCreated(podUID, name string) string {
	id := h.newID(podUID, name)
	h.rt.Set(podUID, name, probes.Container{ID: id})
	return id
}

func (h *fakeHarness) Exit(id string) {
	pc := h.byID[id]
	h.rt.Exit(pc[0], pc[1])
}

func (h *fakeHarness) Restart(id string, startedAt time.Time) string {
	pc := h.byID[id]
	return h.AddRunning(pc[0], pc[1], startedAt)
}

func (h *fakeHarness) ReplyExec(r probestest.ExecReply) {
	h.rt.OnExec(func(context.Context, string, []string, time.Duration) ([]byte, []byte, int32, error) {
		switch {
		case r.TimedOut:
			return nil, nil, 0, fmt.Errorf("fake: %w", probes.ErrExecTimeout)
		case r.Err != nil:
			return nil, nil, 0, r.Err
		}
		return []byte(r.Stdout), []byte(r.Stderr), r.ExitCode, nil
	})
}

func TestRuntimeConformance(t *testing.T) {
	probestest.RuntimeConformance(t, func(*testing.T) probestest.Harness {
		return &fakeHarness{rt: probestest.NewRuntime(), byID: map[string][2]string{}}
	})
}
