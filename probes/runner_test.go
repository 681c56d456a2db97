package probes_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/probes"
	"github.com/shoal-io/shoal/probes/probestest"
)

const (
	podUID = "uid-web"
	app    = "app"
	podIP  = "10.0.0.1"
)

// env is a runner over a fake runtime and a fake network. It lives inside
// a synctest bubble: time is the bubble's, and settle lets every goroutine
// finish what it can before the test looks.
type env struct {
	t      *testing.T
	rt     *probestest.Runtime
	net    *probestest.Network
	reg    *prometheus.Registry
	runner *probes.Runner

	mu      sync.Mutex
	changes []probes.Result
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, rt: probestest.NewRuntime(), net: probestest.NewNetwork(), reg: prometheus.NewRegistry()}
	e.runner = probes.New(e.rt, probes.WithDialer(e.net.Dial), probes.WithRegisterer(e.reg))
	return e
}

// start runs the runner (and a reader of its changes) until the test ends.
func (e *env) start() {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.runner.Run(ctx) }()
	read := make(chan struct{})
	go func() {
		defer close(read)
		for res := range e.runner.Changes() {
			e.mu.Lock()
			e.changes = append(e.changes, res)
			e.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() {
		cancel()
		require.NoError(e.t, <-ran)
		<-read
	})
	synctest.Wait()
}

// startSettled starts the runner and lets more than any period pass, so
// that workers started from now on probe at once (no start-up jitter).
func (e *env) startSettled() {
	e.start()
	e.settle(time.Hour)
}

// settle lets d pass on the bubble's clock and waits for every goroutine to
// block.
func (e *env) settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// takeChanges returns the changes received since the last call.
func (e *env) takeChanges() []probes.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.changes
	e.changes = nil
	return out
}

// states returns the states of the changes received since the last call.
func (e *env) changedStates() []probes.State {
	var out []probes.State
	for _, c := range e.takeChanges() {
		out = append(out, c.State)
	}
	return out
}

// requireChanges checks the states received since the last call: a
// reader may miss intermediate states (a key's changes not yet received
// are coalesced into its latest), so they must be a subsequence of want
// that ends with want's last state.
func (e *env) requireChanges(want ...probes.State) {
	e.t.Helper()
	got := e.changedStates()
	require.NotEmpty(e.t, got, "no change received, want %v", want)
	require.Equal(e.t, want[len(want)-1], got[len(got)-1], "last change of %v", got)
	i := 0
	for _, st := range got {
		for i < len(want) && want[i] != st {
			i++
		}
		require.Less(e.t, i, len(want), "changes %v are not a subsequence of %v", got, want)
		i++
	}
}

// result returns the current result of key.
func (e *env) result(key probes.Key) (probes.Result, bool) {
	for _, r := range e.runner.Results() {
		if r.Key == key {
			return r, true
		}
	}
	return probes.Result{}, false
}

func (e *env) state(key probes.Key) probes.State {
	r, ok := e.result(key)
	if !ok {
		return ""
	}
	return r.State
}

func (e *env) counter(name string, labels ...string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	require.NoError(e.t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				match = match && found
			}
			if match {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func key(probe string) probes.Key {
	return probes.Key{PodUID: podUID, Container: app, ProbeName: probe}
}

// execSpec is an exec probe of the app container with a 10 s period.
func execSpec(probe string, cmd ...string) probes.Spec {
	if len(cmd) == 0 {
		cmd = []string{"check"}
	}
	return probes.Spec{
		Key: key(probe), PodNamespace: "default", PodName: "web", PodIP: podIP,
		Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}, PeriodSeconds: 10},
	}
}

func tcpSpec(probe string, port intstr.IntOrString) probes.Spec {
	s := execSpec(probe)
	s.Probe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}
	return s
}

func httpSpec(probe string, port intstr.IntOrString, path string) probes.Spec {
	s := execSpec(probe)
	s.Probe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: port, Path: path}}
	return s
}

// verdicts answers exec probes from a script: 's' exits 0 printing "ok",
// 'f' exits 1 with "bad" on stderr; past its end the last answer repeats.
func verdicts(script string) probestest.ExecFunc {
	var mu sync.Mutex
	i := 0
	return func(context.Context, string, []string, time.Duration) ([]byte, []byte, int32, error) {
		mu.Lock()
		c := script[min(i, len(script)-1)]
		i++
		mu.Unlock()
		if c == 's' {
			return []byte("ok"), nil, 0, nil
		}
		return nil, []byte("bad"), 1, nil
	}
}

func TestThresholds(t *testing.T) {
	const (
		U = probes.StateUnknown
		S = probes.StateSucceeded
		F = probes.StateFailed
	)
	tests := []struct {
		name             string
		success, failure int32
		script           string
		want             []probes.State // after each probe
	}{
		{name: "zero thresholds count as 1", script: "sfs", want: []probes.State{S, F, S}},
		{name: "success threshold 2", success: 2, script: "sssff", want: []probes.State{U, S, S, F, F}},
		{name: "failure threshold 3", failure: 3, script: "sfffsf", want: []probes.State{S, S, S, F, S, S}},
		{name: "alternating results never reach threshold 2", success: 2, failure: 2, script: "sfsfsf", want: []probes.State{U, U, U, U, U, U}},
		{name: "counts restart after the other verdict", success: 1, failure: 2, script: "sfsffs", want: []probes.State{S, S, S, S, F, S}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.startSettled()
				e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
				e.rt.OnExec(verdicts(tc.script))
				spec := execSpec("p")
				spec.Probe.SuccessThreshold, spec.Probe.FailureThreshold = tc.success, tc.failure
				e.runner.Set([]probes.Spec{spec})
				synctest.Wait()
				got := []probes.State{e.state(key("p"))}
				for range len(tc.script) - 1 {
					e.settle(10 * time.Second)
					got = append(got, e.state(key("p")))
				}
				require.Equal(t, tc.want, got)
				require.Len(t, e.rt.ExecCalls(), len(tc.script), "one probe per period")
			})
		})
	}
}

func TestResultTimesAndMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		e.rt.OnExec(verdicts("ssf"))
		spec := execSpec("p")
		spec.Probe.FailureThreshold = 2
		t0 := time.Now()
		e.runner.Set([]probes.Spec{spec})
		synctest.Wait()

		r, ok := e.result(key("p"))
		require.True(t, ok)
		require.Equal(t, probes.Result{
			Key: key("p"), PodNamespace: "default", PodName: "web", State: probes.StateSucceeded, Message: "ok",
			LastProbeTime: t0, LastTransitionTime: t0, ContainerID: "c1",
		}, r)
		e.requireChanges(probes.StateUnknown, probes.StateSucceeded) // first sight of the container, then the verdict

		e.settle(10 * time.Second) // s again: no change, fresher probe time
		r, _ = e.result(key("p"))
		require.Equal(t, t0.Add(10*time.Second), r.LastProbeTime)
		require.Equal(t, t0, r.LastTransitionTime)
		require.Empty(t, e.takeChanges(), "no change, nothing sent")

		e.settle(10 * time.Second) // f, below its threshold: only the probe time moves
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateSucceeded, r.State)
		require.Equal(t, "ok", r.Message)
		require.Equal(t, t0.Add(20*time.Second), r.LastProbeTime)
		require.Empty(t, e.takeChanges())

		e.settle(10 * time.Second) // f again: Failed with stderr
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateFailed, r.State)
		require.Equal(t, "bad", r.Message)
		require.Equal(t, t0.Add(30*time.Second), r.LastTransitionTime)
		changes := e.takeChanges()
		require.Len(t, changes, 1)
		require.Equal(t, r, changes[0])

		require.EqualValues(t, 2, e.counter(probes.MetricResults, "kind", "exec", "result", "succeeded"))
		require.EqualValues(t, 2, e.counter(probes.MetricResults, "kind", "exec", "result", "failed"))
		require.EqualValues(t, 1, e.counter(probes.MetricStateChanges, "state", "Unknown"))
		require.EqualValues(t, 1, e.counter(probes.MetricStateChanges, "state", "Succeeded"))
		require.EqualValues(t, 1, e.counter(probes.MetricStateChanges, "state", "Failed"))
		require.EqualValues(t, 1, e.counter(probes.MetricWorkers))
	})
}

func TestMessageOnlyChangeIsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		e.rt.OnExec(probestest.Exec("data", "", 0))
		e.runner.Set([]probes.Spec{execSpec("p")})
		synctest.Wait()
		e.takeChanges()

		e.rt.OnExec(probestest.Exec("gate", "", 0))
		e.settle(10 * time.Second)
		changes := e.takeChanges()
		require.Len(t, changes, 1)
		require.Equal(t, probes.StateSucceeded, changes[0].State)
		require.Equal(t, "gate", changes[0].Message)
	})
}

func TestInitialDelayCountsFromContainerStart(t *testing.T) {
	tests := []struct {
		name         string
		initialDelay int32
		startedAgo   time.Duration
		wantFirstAt  time.Duration // after the container's start
	}{
		{name: "zero delay counts as 1 s", initialDelay: 0, startedAgo: 0, wantFirstAt: time.Second},
		{name: "delay not yet over when the worker starts", initialDelay: 10, startedAgo: 3 * time.Second, wantFirstAt: 10 * time.Second},
		{name: "delay over before the worker starts", initialDelay: 10, startedAgo: time.Minute, wantFirstAt: time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.startSettled()
				started := time.Now().Add(-tc.startedAgo)
				e.rt.Start(podUID, app, "c1", started)
				spec := execSpec("p")
				spec.Probe.PeriodSeconds = 1
				spec.Probe.InitialDelaySeconds = tc.initialDelay
				e.runner.Set([]probes.Spec{spec})
				e.settle(15 * time.Second)
				calls := e.rt.ExecCalls()
				require.NotEmpty(t, calls)
				require.Equal(t, tc.wantFirstAt, calls[0].At.Sub(started))
				require.Equal(t, probes.StateSucceeded, e.state(key("p")))
			})
		})
	}
}

func TestContainerRestartResetsToUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		spec := execSpec("p")
		spec.Probe.InitialDelaySeconds = 15
		spec.Probe.FailureThreshold = 3
		e.runner.Set([]probes.Spec{spec})
		synctest.Wait()
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))
		e.takeChanges()

		e.rt.Start(podUID, app, "c2", time.Now()) // the kubelet restarted it
		e.settle(10 * time.Second)
		r, _ := e.result(key("p"))
		require.Equal(t, probes.StateUnknown, r.State)
		require.Empty(t, r.Message)
		require.Equal(t, "c2", r.ContainerID)
		require.Len(t, e.rt.ExecCalls(), 1, "no probe within the new container's initial delay")

		e.settle(10 * time.Second)
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateSucceeded, r.State)
		require.Equal(t, "c2", e.rt.ExecCalls()[1].ContainerID)
		require.Equal(t, []probes.State{probes.StateUnknown, probes.StateSucceeded}, e.changedStates())
	})
}

func TestNonRunningContainerFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		spec := execSpec("p")
		spec.Probe.FailureThreshold = 5
		e.runner.Set([]probes.Spec{spec})
		synctest.Wait()
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))

		e.rt.Exit(podUID, app)
		e.settle(10 * time.Second)
		r, _ := e.result(key("p"))
		require.Equal(t, probes.StateFailed, r.State, "no failure threshold for a stopped container")
		require.Equal(t, "Container(app) is Non-running", r.Message)
		require.Len(t, e.rt.ExecCalls(), 1, "a stopped container is not probed")

		// A container created but not started yet is not running either.
		e.rt.Set(podUID, app, probes.Container{ID: "c2"})
		e.settle(10 * time.Second)
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateFailed, r.State)
		require.Equal(t, "c2", r.ContainerID)
		e.requireChanges(probes.StateUnknown, probes.StateSucceeded, probes.StateFailed, probes.StateUnknown, probes.StateFailed)
	})
}

func TestExecVerdicts(t *testing.T) {
	transport := errors.New("rpc error: code = Unavailable desc = connection closed")
	tests := []struct {
		name      string
		exec      probestest.ExecFunc
		want      probes.State
		wantMsg   string
		wantError bool // no verdict: the previous state stays
	}{
		{name: "exit 0 succeeds with stdout", exec: probestest.Exec("all good\n", "warning", 0), want: probes.StateSucceeded, wantMsg: "all good\n"},
		{name: "non-zero exit fails with stderr", exec: probestest.Exec("partial", "broken pipe", 2), want: probes.StateFailed, wantMsg: "broken pipe"},
		{name: "timeout fails", exec: probestest.ExecError(fmt.Errorf("deadline: %w", probes.ErrExecTimeout)), want: probes.StateFailed, wantMsg: `command "check" timed out after 3s`},
		{name: "runtime that hangs past the timeout fails", exec: func(ctx context.Context, _ string, _ []string, _ time.Duration) ([]byte, []byte, int32, error) {
			<-ctx.Done()
			return nil, nil, 0, ctx.Err()
		}, want: probes.StateFailed, wantMsg: `command "check" timed out after 3s`},
		{name: "transport error keeps the state", exec: probestest.ExecError(transport), wantError: true},
		{name: "long output is truncated", exec: probestest.Exec(strings.Repeat("€", 1000), "", 0), want: probes.StateSucceeded, wantMsg: strings.Repeat("€", 341)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.startSettled()
				e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
				spec := execSpec("p", "check")
				spec.Probe.TimeoutSeconds = 3
				spec.Probe.PeriodSeconds = 60
				e.rt.OnExec(verdicts("f"))
				e.runner.Set([]probes.Spec{spec})
				synctest.Wait()
				require.Equal(t, probes.StateFailed, e.state(key("p")))
				e.takeChanges()

				e.rt.OnExec(tc.exec)
				e.settle(time.Minute + 10*time.Second) // the next period, plus the longest a probe may take
				r, _ := e.result(key("p"))
				calls := e.rt.ExecCalls()
				require.Len(t, calls, 2)
				require.Equal(t, probestest.ExecCall{ContainerID: "c1", Cmd: []string{"check"}, Timeout: 3 * time.Second, At: calls[1].At}, calls[1])
				if tc.wantError {
					require.Equal(t, probes.StateFailed, r.State)
					require.Equal(t, "bad", r.Message, "the previous result stays")
					require.Empty(t, e.takeChanges())
					require.EqualValues(t, 1, e.counter(probes.MetricResults, "kind", "exec", "result", "error"))
					return
				}
				require.Equal(t, tc.want, r.State)
				require.Equal(t, tc.wantMsg, r.Message)
				require.LessOrEqual(t, len(r.Message), probes.MaxMessageBytes)
			})
		})
	}
}

func TestLookupErrorKeepsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		e.runner.Set([]probes.Spec{execSpec("p")})
		synctest.Wait()
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))
		e.takeChanges()

		e.rt.FailLookups(errors.New("runtime down"))
		e.settle(time.Minute)
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))

		e.rt.FailLookups(nil)
		e.rt.Remove(podUID, app) // gone (pod being deleted): nothing changes either
		e.settle(time.Minute)
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))
		require.Empty(t, e.takeChanges())
		require.Len(t, e.rt.ExecCalls(), 1)
	})
}

func TestContainerNotFoundHasNoResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.runner.Set([]probes.Spec{execSpec("p")})
		e.settle(time.Minute)
		require.Empty(t, e.runner.Results())
		require.Empty(t, e.takeChanges())
		require.Positive(t, e.rt.Lookups())
	})
}

// serveHTTP serves h on addr of the fake network until the test ends.
func serveHTTP(t *testing.T, n *probestest.Network, addr string, h http.HandlerFunc) *probestest.Listener {
	l := n.Listen(addr)
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return l
}

func TestTCPProbeOnFakeNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		l := serveHTTP(t, e.net, podIP+":7777", func(http.ResponseWriter, *http.Request) {})
		named := tcpSpec("named", intstr.FromString("game"))
		named.ContainerPorts = []corev1.ContainerPort{{Name: "game", ContainerPort: 7777}}
		unknown := tcpSpec("unknown", intstr.FromString("nope"))
		e.runner.Set([]probes.Spec{tcpSpec("p", intstr.FromInt32(7777)), named, unknown})
		synctest.Wait()
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))
		require.Equal(t, probes.StateSucceeded, e.state(key("named")))
		r, _ := e.result(key("unknown"))
		require.Equal(t, probes.StateFailed, r.State)
		require.Contains(t, r.Message, `port "nope" is not a port name of the container`)

		require.NoError(t, l.Close())
		e.settle(10 * time.Second)
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateFailed, r.State)
		require.Contains(t, r.Message, "connection refused")

		// A peer that never answers: the dial times out after timeoutSeconds.
		e.net.Listen(podIP + ":7777")
		e.runner.Set([]probes.Spec{tcpSpec("p", intstr.FromInt32(7777))})
		e.settle(11 * time.Second) // the next period, plus the 1 s timeout
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateFailed, r.State)
		require.Contains(t, r.Message, "timed out after 1s")
		require.EqualValues(t, 2, e.counter(probes.MetricResults, "kind", "tcp", "result", "succeeded"))
	})
}

func TestHTTPProbeOnFakeNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		var mu sync.Mutex
		status, hang := http.StatusOK, false
		var userAgent string
		serveHTTP(t, e.net, podIP+":8080", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			st, h := status, hang
			userAgent = r.UserAgent()
			mu.Unlock()
			if h {
				<-r.Context().Done()
				return
			}
			w.WriteHeader(st)
			_, _ = fmt.Fprintf(w, "status %d", st)
		})
		spec := httpSpec("p", intstr.FromString("http"), "/healthz")
		spec.ContainerPorts = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		spec.Probe.TimeoutSeconds = 2
		e.runner.Set([]probes.Spec{spec})
		synctest.Wait()
		r, _ := e.result(key("p"))
		require.Equal(t, probes.StateSucceeded, r.State)
		require.Equal(t, "status 200", r.Message)
		mu.Lock()
		require.Equal(t, probes.UserAgent, userAgent)
		status = http.StatusInternalServerError
		mu.Unlock()

		e.settle(10 * time.Second)
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateFailed, r.State)
		require.Contains(t, r.Message, "status 500")

		mu.Lock()
		status = http.StatusOK
		mu.Unlock()
		e.settle(10 * time.Second)
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))

		mu.Lock()
		hang = true
		mu.Unlock()
		e.settle(12 * time.Second) // the next period, plus the 2 s timeout
		r, _ = e.result(key("p"))
		require.Equal(t, probes.StateFailed, r.State)
		require.Contains(t, r.Message, "timed out after 2s")
	})
}

func TestStartupJitterBoundedByPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		const n = 20
		var specs []probes.Spec
		for i := range n {
			uid := fmt.Sprintf("uid-%d", i)
			e.rt.Start(uid, app, "c-"+uid, time.Now().Add(-time.Hour))
			s := execSpec("p")
			s.PodUID = uid
			specs = append(specs, s)
		}
		e.runner.Set(specs) // before Run: an agent restart
		t0 := time.Now()
		e.start()
		e.settle(10*time.Second - time.Nanosecond)
		calls := e.rt.ExecCalls()
		require.Len(t, calls, n, "every worker probed within one period of the start")
		first := map[string]time.Duration{}
		distinct := map[time.Duration]bool{}
		for _, c := range calls {
			d := c.At.Sub(t0)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.Less(t, d, 10*time.Second)
			require.Zero(t, d%probes.DefaultTick, "probes run on the runner's ticks, so that probes due together share a wake-up")
			first[c.ContainerID] = d
			distinct[d] = true
		}
		require.Len(t, first, n)
		require.Greater(t, len(distinct), 1, "first probes are spread, not all at once")

		// After the jittered first probe, each worker keeps its period.
		e.settle(10 * time.Second)
		calls = e.rt.ExecCalls()
		require.Len(t, calls, 2*n)
		for _, c := range calls[n:] {
			require.Equal(t, first[c.ContainerID]+10*time.Second, c.At.Sub(t0))
		}

		// A worker started long after the runner's start probes at once
		// (at the latest on the nearest tick), then keeps to the ticks.
		e.settle(time.Minute)
		before := len(e.rt.ExecCalls())
		e.rt.Start("uid-late", app, "c-late", time.Now().Add(-time.Hour))
		late := execSpec("p")
		late.PodUID = "uid-late"
		e.runner.Set(append(specs, late))
		lateCalls := func() (at []time.Duration) {
			for _, c := range e.rt.ExecCalls()[before:] {
				if c.ContainerID == "c-late" {
					at = append(at, c.At.Sub(t0))
				}
			}
			return at
		}
		e.settle(probes.DefaultTick / 2)
		require.Len(t, lateCalls(), 1)
		e.settle(10 * time.Second)
		require.Len(t, lateCalls(), 2)
		require.Zero(t, lateCalls()[1]%probes.DefaultTick, "the late worker's second probe is on a tick")
	})
}

func TestSetUpdatesInPlaceAndStopsRemovedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		e.rt.OnExec(func(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
			if cmd[0] == "good" {
				return []byte("good"), nil, 0, nil
			}
			return nil, []byte("bad"), 1, nil
		})
		a, b := execSpec("a", "good"), execSpec("b", "good")
		e.runner.Set([]probes.Spec{a, b})
		synctest.Wait()
		require.Equal(t, probes.StateSucceeded, e.state(key("a")))
		require.Equal(t, probes.StateSucceeded, e.state(key("b")))
		e.takeChanges()
		require.EqualValues(t, 2, e.counter(probes.MetricWorkers))

		// Timings only: same state, no reset, new period.
		a.Probe.PeriodSeconds = 3
		a.Probe.FailureThreshold = 2
		e.runner.Set([]probes.Spec{a, b})
		e.settle(9 * time.Second)
		require.Empty(t, e.takeChanges(), "a timing change resets nothing")
		callsOf := func(p string) int {
			n := 0
			for _, c := range e.rt.ExecCalls() {
				if c.Cmd[0] == p {
					n++
				}
			}
			return n
		}
		require.Equal(t, 2+3, callsOf("good"), "a probes every 3 s (3 probes in 9 s), b not yet")

		// A new handler: Unknown at once, then probed at once.
		a.Probe.Exec.Command = []string{"bad"}
		a.Probe.FailureThreshold = 1
		e.runner.Set([]probes.Spec{a, b})
		synctest.Wait()
		e.requireChanges(probes.StateUnknown, probes.StateFailed)
		require.Equal(t, 1, callsOf("bad"))

		// Set with the same specs again changes nothing.
		e.runner.Set([]probes.Spec{a, b})
		synctest.Wait()
		require.Empty(t, e.takeChanges())
		require.Equal(t, 1, callsOf("bad"))

		// Removing b stops its worker and forgets its result.
		e.runner.Set([]probes.Spec{a})
		e.settle(time.Minute)
		_, ok := e.result(key("b"))
		require.False(t, ok)
		goodBefore := callsOf("good")
		e.settle(time.Minute)
		require.Equal(t, goodBefore, callsOf("good"), "b is no longer probed")
		require.EqualValues(t, 1, e.counter(probes.MetricWorkers))
		require.Len(t, e.runner.Results(), 1)

		// A spec with an incomplete key is ignored.
		bad := execSpec("")
		e.runner.Set([]probes.Spec{a, bad})
		synctest.Wait()
		require.EqualValues(t, 1, e.counter(probes.MetricWorkers))
	})
}

func TestHandlerChangeResetsToUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.startSettled()
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		l := e.net.Listen(podIP + ":80")
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		defer l.Close()
		s := tcpSpec("p", intstr.FromInt32(80))
		s.Probe.SuccessThreshold = 2
		e.runner.Set([]probes.Spec{s})
		e.settle(10 * time.Second)
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))
		e.takeChanges()

		// The port moves (e2e tcpCheck: 80 -> 8081): Unknown, and it stays
		// Unknown (not Succeeded) until the new port's verdict is certain.
		s.Probe.TCPSocket.Port = intstr.FromInt32(8081)
		e.runner.Set([]probes.Spec{s})
		synctest.Wait()
		require.Equal(t, probes.StateFailed, e.state(key("p")), "refused at once, failure threshold 1")
		e.requireChanges(probes.StateUnknown, probes.StateFailed)

		// A named port resolving to the same number is not a change.
		s.Probe.TCPSocket.Port = intstr.FromInt32(80)
		e.runner.Set([]probes.Spec{s})
		synctest.Wait()
		require.Equal(t, probes.StateUnknown, e.state(key("p")), "below the success threshold after the reset")
		e.settle(10 * time.Second)
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))
		e.takeChanges()
		s.Probe.TCPSocket.Port = intstr.FromString("web")
		s.ContainerPorts = []corev1.ContainerPort{{Name: "web", ContainerPort: 80}}
		e.runner.Set([]probes.Spec{s})
		synctest.Wait()
		require.Equal(t, probes.StateSucceeded, e.state(key("p")))
		require.Empty(t, e.takeChanges())
	})
}

func TestRestoreDoesNotFlap(t *testing.T) {
	earlier := func() time.Time { return time.Now().Add(-30 * time.Minute) }
	tests := []struct {
		name        string
		containerID string // of the container now
		wantChanges []probes.State
		wantKept    bool
	}{
		{name: "same container keeps the restored result", containerID: "c1", wantKept: true},
		{name: "new container starts from Unknown", containerID: "c2", wantChanges: []probes.State{probes.StateUnknown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.rt.Start(podUID, app, tc.containerID, time.Now().Add(-time.Hour))
				e.rt.OnExec(verdicts("ff"))
				restored := probes.Result{
					Key: key("p"), PodNamespace: "default", PodName: "web", State: probes.StateSucceeded, Message: "ok",
					LastProbeTime: earlier(), LastTransitionTime: earlier(), ContainerID: "c1",
				}
				spec := execSpec("p")
				spec.Probe.FailureThreshold = 2
				spec.Probe.SuccessThreshold = 3
				e.runner.Restore([]probes.Result{restored, {Key: key("other"), State: probes.StateFailed, ContainerID: "c1"}})
				require.Equal(t, []probes.Result{{Key: key("other"), State: probes.StateFailed, ContainerID: "c1"}, restored}, e.runner.Results(),
					"restored results are visible at once")
				e.runner.Set([]probes.Spec{spec})
				require.Equal(t, []probes.Result{restored}, e.runner.Results(), "Set drops restored keys it does not list")
				e.start()
				e.settle(10 * time.Second) // jitter, then one failing probe, below its threshold

				r, _ := e.result(key("p"))
				require.Len(t, e.rt.ExecCalls(), 1)
				if tc.wantKept {
					require.Equal(t, probes.StateSucceeded, r.State)
					require.Equal(t, "ok", r.Message)
					require.Equal(t, restored.LastTransitionTime, r.LastTransitionTime)
					require.Empty(t, e.takeChanges(), "nothing to report")
				} else {
					require.Equal(t, probes.StateUnknown, r.State)
					require.Equal(t, tc.wantChanges, e.changedStates())
				}
				// Restoring over a running worker does nothing.
				e.runner.Restore([]probes.Result{{Key: key("p"), State: probes.StateFailed, ContainerID: tc.containerID}})
				r2, _ := e.result(key("p"))
				require.Equal(t, r, r2)
			})
		})
	}
}

func TestChangesCoalesceForASlowReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		ran := make(chan error, 1)
		go func() { ran <- e.runner.Run(ctx) }()
		e.settle(time.Hour)
		e.rt.Start(podUID, app, "c1", time.Now().Add(-time.Hour))
		e.rt.OnExec(verdicts("sfsf"))
		e.runner.Set([]probes.Spec{execSpec("a"), execSpec("b")})
		e.settle(35 * time.Second) // nobody reads Changes meanwhile

		got := map[probes.Key]probes.Result{}
		for range 2 {
			r := <-e.runner.Changes()
			got[r.Key] = r
		}
		for _, k := range []probes.Key{key("a"), key("b")} {
			now, _ := e.result(k)
			// LastProbeTime alone moving is not a change; the rest is the
			// latest.
			now.LastProbeTime = got[k].LastProbeTime
			require.Equal(t, now, got[k], "the latest result of each key, once")
		}
		select {
		case r := <-e.runner.Changes():
			t.Fatalf("unexpected change %+v", r)
		default:
		}
		cancel()
		require.NoError(t, <-ran)
		_, open := <-e.runner.Changes()
		require.False(t, open, "Changes is closed when Run returns")
		require.Error(t, e.runner.Run(context.Background()), "Run runs once")
	})
}

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	probes.New(probestest.NewRuntime(), probes.WithRegisterer(reg))
	n, err := testutil.GatherAndCount(reg, probes.MetricWorkers)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Panics(t, func() { probes.New(probestest.NewRuntime(), probes.WithRegisterer(reg)) }, "registering twice")
}

func TestInjectedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnv(t)
		e.runner = probes.New(e.rt, probes.WithClock(fc))
		e.start()
		fc.Step(time.Hour) // past the start-up jitter
		e.rt.Start(podUID, app, "c1", fc.Now().Add(-time.Minute))
		e.runner.Set([]probes.Spec{execSpec("p")})
		synctest.Wait()
		r, _ := e.result(key("p"))
		require.Equal(t, probes.StateSucceeded, r.State)
		require.Equal(t, fc.Now(), r.LastProbeTime, "times come from the injected clock")
		require.Len(t, e.rt.ExecCalls(), 1)

		e.settle(time.Hour) // the bubble's time does not drive the runner
		require.Len(t, e.rt.ExecCalls(), 1)
		fc.Step(10 * time.Second)
		synctest.Wait()
		require.Len(t, e.rt.ExecCalls(), 2)
	})
}
