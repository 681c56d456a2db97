package work

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/probes"
	"github.com/shoal-io/shoal/probes/probestest"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// probeItem is the probe work of pod uid "u1": one exec probe.
func probeItem(t *testing.T, gen int64) *nodeworkv1.WorkItem {
	t.Helper()
	raw, err := json.Marshal(corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/idle.sh"}}}})
	require.NoError(t, err)
	return &nodeworkv1.WorkItem{Id: nodework.ProbeID("ns", "game-0"), Generation: gen, Kind: nodework.KindProbe,
		Spec: &nodeworkv1.WorkItem_Probe{Probe: &nodeworkv1.ProbeSpec{
			PodUid: "u1", PodNamespace: "ns", PodName: "game-0", PodIp: "10.0.0.7",
			Probes: []*nodeworkv1.PodProbe{{Name: "game#idle", ContainerName: "game", ProbeJson: raw}},
		}}}
}

// probeState is the reported state of the item's probe.
func probeState(r *Runner) (nodeworkv1.ProbeState, string, bool) {
	rep, ok := r.Report(nodework.ProbeID("ns", "game-0"))
	if !ok || len(rep.GetProbe().GetProbes()) == 0 {
		return 0, "", false
	}
	p := rep.GetProbe().GetProbes()[0]
	return p.GetState(), p.GetMessage(), true
}

func TestProbeReportsChangesAndRestores(t *testing.T) {
	dir := t.TempDir()
	rt := probestest.NewRuntime()
	rt.Start("u1", "game", "c1", time.Now().Add(-time.Minute))
	var exitCode atomic.Int32
	rt.OnExec(func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error) {
		if c := exitCode.Load(); c != 0 {
			return nil, []byte("players: 3"), c, nil
		}
		return []byte("idle"), nil, 0, nil
	})

	run := func() (*Runner, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		pr := probes.New(rt)
		h := NewProbe(pr, nil)
		done := make(chan struct{}, 2)
		go func() { _ = pr.Run(ctx); done <- struct{}{} }()
		go func() { _ = h.Relay(ctx); done <- struct{}{} }()
		r, stop := startStoppable(t, dir, map[string]Handler{nodework.KindProbe: h})
		return r, func() { stop(); cancel(); <-done; <-done }
	}
	r, stop := run()
	r.Upsert(probeItem(t, 1))
	require.Eventually(t, func() bool {
		s, msg, ok := probeState(r)
		return ok && s == nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED && msg == "idle"
	}, 10*time.Second, 10*time.Millisecond, "the probe succeeds and is reported")
	rep, _ := r.Report(nodework.ProbeID("ns", "game-0"))
	require.Equal(t, nodeworkv1.Phase_PHASE_RUNNING, rep.GetPhase(), "a probe item runs until removed")
	require.Equal(t, "u1", rep.GetProbe().GetPodUid())

	exitCode.Store(1)
	require.Eventually(t, func() bool {
		s, msg, ok := probeState(r)
		return ok && s == nodeworkv1.ProbeState_PROBE_STATE_FAILED && msg == "players: 3"
	}, 10*time.Second, 10*time.Millisecond, "the failure and its stderr are reported")
	stop()

	// A restarted agent reports the saved state at once, not Unknown.
	execs := len(rt.ExecCalls())
	r, stop = run()
	defer stop()
	require.Eventually(t, func() bool {
		s, _, ok := probeState(r)
		return ok && s == nodeworkv1.ProbeState_PROBE_STATE_FAILED
	}, 10*time.Second, 10*time.Millisecond)
	for range 50 {
		s, _, _ := probeState(r)
		require.NotEqual(t, nodeworkv1.ProbeState_PROBE_STATE_UNSPECIFIED, s, "no flap to Unknown after a restart")
	}
	require.Eventually(t, func() bool { return len(rt.ExecCalls()) > execs }, 10*time.Second, 10*time.Millisecond, "it keeps probing")
}
