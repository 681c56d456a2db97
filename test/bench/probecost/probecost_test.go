//go:build bench

// Package probecost measures what PodProbeMarker probes cost the node
// agent in CPU (issue 22): CPU per tcp, http and exec probe, with the
// probes run by the agent's own code (probes.Runner over
// probes.CRIRuntime) against real containers of a private containerd
// (runc), and exec probes set against a bare `runc exec` on the same
// machine.
//
// The test process plays the agent: the CPU it uses (getrusage
// RUSAGE_SELF, user+system) while the runner probes, minus what it uses
// idle over the same time, divided by the probes run (the runner's own
// results metric), is the agent's CPU per probe. The runtime side of an
// exec (containerd's CRI, the shim, runc and the exec'd command) is read
// from /proc/<pid>/stat of the private containerd and its shims (their
// own time and their reaped children's), minus their idle time too.
//
//	make bench-probecost   (or hack/bench-probecost.sh; needs root,
//	                        containerd, runc and busybox-static)
package probecost

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/cri"
	"github.com/shoal-io/shoal/probes"
)

// goalCPU is issue 22's goal for tcp and http probes: at most 0.2 ms of
// agent CPU each.
const goalCPU = 200 * time.Microsecond

// period is every probe's period: PodProbeMarker's shortest, 1 s.
const period = time.Second

// warmup runs the probes before a window is measured: the runner spreads
// its workers' first probes over one period, and the first results are
// state changes.
const warmup = period + 2*time.Second

// execCommand is the exec probes' command: as small as a command gets, so
// that what is measured is the exec path, not the command.
var execCommand = []string{"true"}

var (
	flagProbes = flag.Int("probes", envInt("SHOAL_BENCH_PROBES", 100),
		"probe workers for tcp and http, one probe per second each (env SHOAL_BENCH_PROBES)")
	flagExecProbes = flag.Int("exec-probes", envInt("SHOAL_BENCH_EXEC_PROBES", 20),
		"exec probe workers, one exec per second each; also the loops of the bare exec baselines (env SHOAL_BENCH_EXEC_PROBES)")
	flagSeconds = flag.Int("seconds", envInt("SHOAL_BENCH_SECONDS", 30),
		"seconds of each measured window (env SHOAL_BENCH_SECONDS)")
	flagPhases = flag.String("phases", os.Getenv("SHOAL_BENCH_PHASES"),
		"comma-separated phases to run (default all): tcp,tcp-exact,http,http-exact,lookup,exec,cri-exec,runc-exec (env SHOAL_BENCH_PHASES)")
)

// runs reports whether the phase is one -phases asks for.
func runs(phase string) bool {
	if *flagPhases == "" {
		return true
	}
	for p := range strings.SplitSeq(*flagPhases, ",") {
		if strings.TrimSpace(p) == phase {
			return true
		}
	}
	return false
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// phase is one measured window.
type phase struct {
	name    string
	what    string // what one operation is
	workers int
	ops     int64 // operations completed in the window
	bad     int64 // of which failed or errored
	u       usage
	// own is CPU measured per process (the bare runc loop: each runc's
	// rusage with its reaped children); zero for the other phases.
	own time.Duration
}

// idleRate is CPU per second of wall time while nothing runs.
type idleRate struct{ agent, runtime float64 }

// net returns the agent and runtime CPU per operation, idle subtracted.
func (p phase) net(idle idleRate) (agent, runtime time.Duration) {
	if p.ops == 0 {
		return 0, 0
	}
	w := p.u.wall.Seconds()
	agent = time.Duration((float64(p.u.agent) - idle.agent*w) / float64(p.ops))
	runtime = time.Duration((float64(p.u.runtime) - idle.runtime*w) / float64(p.ops))
	return agent, runtime
}

// TestProbeCostBenchmark runs, each for -seconds after a warm-up:
//
//  1. idle: the pod runs, nothing probes (the baseline, measured again at
//     the end; the mean of both is subtracted);
//  2. tcp: -probes tcpSocket probes of the testserver, period 1 s, by the
//     runner as the agent builds it (workers woken on its tick);
//  3. tcp-exact: the same with probes.WithTick(0), each worker woken
//     exactly when its probe is due: the baseline for the tick;
//  4. http and http-exact: -probes httpGet probes of its /healthz, the
//     same two ways;
//  5. lookup: the container lookup every probe does first
//     (CRIRuntime.ContainerOf: a remembered container checked against the
//     node's running list), alone, at the same rate as tcp and http, to
//     show its share;
//  6. exec: -exec-probes exec probes ("true" in the busybox container);
//  7. cri-exec: bare CRI ExecSync of the same command at the same rate,
//     without the runner;
//  8. runc-exec: bare `runc exec` of the same command in the same
//     container at the same rate, CPU from each runc's rusage.
//
// It prints a table and one RESULT line. The figures are measurements: the
// run fails only when something breaks.
func TestProbeCostBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a containerd")
	}
	window := time.Duration(*flagSeconds) * time.Second
	require.Positive(t, window)
	require.Positive(t, *flagProbes)
	require.Positive(t, *flagExecProbes)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	e := startPod(ctx, t)

	idle := func(name string) phase {
		s0, err := e.sample()
		require.NoError(t, err)
		sleep(ctx, window)
		s1, err := e.sample()
		require.NoError(t, err)
		return phase{name: name, u: s1.since(s0)}
	}
	var phases []phase
	idle0 := idle("idle")
	t.Logf("idle: agent %v, runtime %v in %v", idle0.u.agent, idle0.u.runtime, idle0.u.wall.Round(time.Millisecond))

	specs := func(kind string, n int, container string, h corev1.ProbeHandler, timeout int32) []probes.Spec {
		out := make([]probes.Spec, n)
		for i := range out {
			out[i] = probes.Spec{
				Key:          probes.Key{PodUID: podUID, Container: container, ProbeName: fmt.Sprintf("bench#%s-%03d", kind, i)},
				PodNamespace: podNamespace,
				PodName:      podName,
				PodIP:        "127.0.0.1",
				Probe: corev1.Probe{
					ProbeHandler:   h,
					PeriodSeconds:  int32(period / time.Second),
					TimeoutSeconds: timeout,
				},
			}
		}
		return out
	}
	port := intstr.FromInt32(int32(e.port))
	n, nExec := *flagProbes, *flagExecProbes

	tcp := specs("tcp", n, serverContainer, corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}, 1)
	httpGet := specs("http", n, serverContainer, corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: port}}, 1)
	// The runner as the agent runs it, then the same probes with every
	// worker woken exactly when its probe is due (no tick): the baseline
	// the tick is measured against, in the same process.
	if runs("tcp") {
		phases = append(phases, e.runnerPhase(ctx, t, "tcp", "tcp probe", window, tcp))
	}
	if runs("tcp-exact") {
		phases = append(phases, e.runnerPhase(ctx, t, "tcp-exact", "tcp probe", window, tcp, probes.WithTick(0)))
	}
	if runs("http") {
		phases = append(phases, e.runnerPhase(ctx, t, "http", "http probe", window, httpGet))
	}
	if runs("http-exact") {
		phases = append(phases, e.runnerPhase(ctx, t, "http-exact", "http probe", window, httpGet, probes.WithTick(0)))
	}
	lookup := probes.CRIRuntime(func() (*cri.Runtime, error) { return e.rt, nil }, nil) // no event stream: the lookup's cost as probes pay it here
	if runs("lookup") {
		phases = append(phases, e.pacedPhase(ctx, t, "lookup", "ContainerOf", n, window, func(ctx context.Context) (bool, time.Duration) {
			c, err := lookup.ContainerOf(ctx, podUID, serverContainer)
			return err == nil && c.Running, 0
		}))
	}
	// Exec probes get 5 s: on a busy machine an exec can take more than
	// the default 1 s, and a timed-out exec is not a probe's usual cost.
	if runs("exec") {
		phases = append(phases, e.runnerPhase(ctx, t, "exec", "exec probe", window,
			specs("exec", nExec, shellContainer, corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: execCommand}}, 5)))
	}
	if runs("cri-exec") {
		phases = append(phases, e.pacedPhase(ctx, t, "cri-exec", "CRI ExecSync", nExec, window, func(ctx context.Context) (bool, time.Duration) {
			_, _, code, err := e.rt.ExecSync(ctx, e.shellID, execCommand, 5*time.Second)
			return err == nil && code == 0, 0
		}))
	}
	switch {
	case !runs("runc-exec"):
	case e.runcRoot != "":
		args := append([]string{"--root", e.runcRoot, "exec", e.shellID}, execCommand...)
		phases = append(phases, e.pacedPhase(ctx, t, "runc-exec", "runc exec", nExec, window, func(ctx context.Context) (bool, time.Duration) {
			cmd := exec.CommandContext(ctx, "runc", args...)
			err := cmd.Run()
			if cmd.ProcessState == nil {
				return false, 0
			}
			return err == nil, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}))
	default:
		t.Log("no runc state found for the shell container under /run/containerd/runc: no bare runc exec baseline")
	}
	idle1 := idle("idle (end)")
	t.Logf("idle (end): agent %v, runtime %v in %v", idle1.u.agent, idle1.u.runtime, idle1.u.wall.Round(time.Millisecond))

	rate := idleRate{
		agent:   float64(idle0.u.agent+idle1.u.agent) / (idle0.u.wall + idle1.u.wall).Seconds(),
		runtime: float64(idle0.u.runtime+idle1.u.runtime) / (idle0.u.wall + idle1.u.wall).Seconds(),
	}
	report(t, rate, idle0, idle1, phases, n, nExec, window)
}

// runnerPhase runs the specs with a probes.Runner built as the agent
// builds it (CRIRuntime, metrics registered) and measures one window
// after the warm-up; the probes run are the runner's results metric.
func (e *podEnv) runnerPhase(ctx context.Context, t *testing.T, name, what string, window time.Duration, specs []probes.Spec, opts ...probes.Option) phase {
	t.Helper()
	reg := prometheus.NewRegistry()
	// The agent's runtime events, which let the runner skip container
	// lookups while nothing changed.
	get := func() (*cri.Runtime, error) { return e.rt, nil }
	events := &cri.Events{}
	ectx, estop := context.WithCancel(ctx)
	defer estop()
	go func() { _ = events.Run(ectx, get) }()
	deadline := time.Now().Add(10 * time.Second)
	for !events.Connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !events.Connected() {
		t.Log("the runtime has no container event stream (containerd before 1.7): a remembered container is checked against the node's running list (one ListContainers a second, shared by every probe)")
	}
	r := probes.New(probes.CRIRuntime(get, events), append([]probes.Option{probes.WithRegisterer(reg)}, opts...)...)
	r.Set(specs)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	// The agent forwards changes to the coordinator; here they are read
	// and dropped (in the steady state there are none).
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range r.Changes() {
		}
	}()
	defer func() {
		stop()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the runner did not stop within 30 s", name)
		}
		<-drained
	}()

	sleep(ctx, warmup)
	kind := strings.Fields(what)[0]
	ok0, bad0 := probeCounts(t, reg, kind)
	s0, err := e.sample()
	require.NoError(t, err)
	sleep(ctx, window)
	s1, err := e.sample()
	require.NoError(t, err)
	ok1, bad1 := probeCounts(t, reg, kind)
	require.NoError(t, ctx.Err(), "%s: the benchmark ran out of time", name)
	p := phase{name: name, what: what, workers: len(specs), ops: ok1 + bad1 - ok0 - bad0, bad: bad1 - bad0, u: s1.since(s0)}
	if p.bad > 0 {
		t.Logf("%s: %d of %d probes failed or gave no verdict; last results: %v", name, p.bad, p.ops, lastBad(r.Results()))
	}
	require.Positive(t, p.ops, "%s: no probe ran", name)
	return p
}

// probeCounts reads the runner's MetricResults for kind: succeeded, and
// failed plus error.
func probeCounts(t *testing.T, reg *prometheus.Registry, kind string) (ok, bad int64) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != probes.MetricResults {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] != kind {
				continue
			}
			v := int64(m.GetCounter().GetValue())
			if labels["result"] == "succeeded" {
				ok += v
			} else {
				bad += v
			}
		}
	}
	return ok, bad
}

// lastBad returns the messages of up to three results that are not
// Succeeded.
func lastBad(rs []probes.Result) []string {
	var out []string
	for _, r := range rs {
		if r.State != probes.StateSucceeded && len(out) < 3 {
			out = append(out, fmt.Sprintf("%s: %s %q", r.ProbeName, r.State, r.Message))
		}
	}
	return out
}

// pacedPhase runs op from n loops, each once per period (the first at a
// random point of the first period, and on the runner's default tick, as
// the runner's workers do), and
// measures one window after the warm-up. op reports success and, for
// operations run in a child process, that process's CPU.
func (e *podEnv) pacedPhase(ctx context.Context, t *testing.T, name, what string, n int, window time.Duration, op func(context.Context) (bool, time.Duration)) phase {
	t.Helper()
	var (
		measuring     atomic.Bool
		ops, bad, own atomic.Int64
		wg            sync.WaitGroup
	)
	lctx, stop := context.WithCancel(ctx)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now().Add(rand.N(period))
			for {
				if !sleepUntil(lctx, next.Round(probes.DefaultTick)) {
					return
				}
				next = next.Add(period)
				// The operation is not cut short when the phase ends (ctx,
				// not lctx): a canceled exec would only log an error.
				octx, cancel := context.WithTimeout(ctx, 10*time.Second)
				ok, cpu := op(octx)
				cancel()
				if measuring.Load() {
					ops.Add(1)
					own.Add(int64(cpu))
					if !ok {
						bad.Add(1)
					}
				}
				if now := time.Now(); next.Before(now) {
					next = now // fell behind: no catching up in a burst
				}
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	sleep(ctx, warmup)
	s0, err := e.sample()
	require.NoError(t, err)
	measuring.Store(true)
	sleep(ctx, window)
	measuring.Store(false)
	s1, err := e.sample()
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "%s: the benchmark ran out of time", name)
	p := phase{name: name, what: what, workers: n, ops: ops.Load(), bad: bad.Load(), own: time.Duration(own.Load()), u: s1.since(s0)}
	if p.bad > 0 {
		t.Logf("%s: %d of %d operations failed", name, p.bad, p.ops)
	}
	require.Positive(t, p.ops, "%s: nothing ran", name)
	return p
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) { sleepUntil(ctx, time.Now().Add(d)) }

// sleepUntil waits until at or until ctx ends; it reports whether ctx is
// still live.
func sleepUntil(ctx context.Context, at time.Time) bool {
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// report prints the table and the RESULT line.
func report(t *testing.T, idle idleRate, idle0, idle1 phase, phases []phase, n, nExec int, window time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	byName := map[string]phase{}
	for _, p := range phases {
		byName[p.name] = p
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\nProbe cost: CPU per operation, idle subtracted (%d s windows; agent = this process, runtime = containerd + shims + what they reaped)\n", int(window/time.Second))
	fmt.Fprintf(&b, "idle: agent %.2f ms/s, runtime %.2f ms/s (start %.2f/%.2f, end %.2f/%.2f)\n\n",
		idle.agent/1e6, idle.runtime/1e6,
		ms(idle0.u.agent)/idle0.u.wall.Seconds(), ms(idle0.u.runtime)/idle0.u.wall.Seconds(),
		ms(idle1.u.agent)/idle1.u.wall.Seconds(), ms(idle1.u.runtime)/idle1.u.wall.Seconds())
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\toperation\tloops\tops\tfailed\tops/s\tagent ms/op\truntime ms/op\ttotal ms/op\t")
	for _, p := range phases {
		agent, rt := p.net(idle)
		total := agent + rt
		agentCol, rtCol := fmt.Sprintf("%.3f", ms(agent)), fmt.Sprintf("%.3f", ms(rt))
		if p.own > 0 { // runc's own rusage: nothing of it is in either process set
			agentCol, rtCol = "-", "-"
			total = p.own / time.Duration(p.ops)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%.3f\t\n", p.name, p.what, p.workers, p.ops, p.bad,
			float64(p.ops)/p.u.wall.Seconds(), agentCol, rtCol, ms(total))
	}
	require.NoError(t, tw.Flush())

	tcpAgent, tcpRT := byName["tcp"].net(idle)
	httpAgent, httpRT := byName["http"].net(idle)
	execAgent, execRT := byName["exec"].net(idle)
	criAgent, criRT := byName["cri-exec"].net(idle)
	execTotal, criTotal := execAgent+execRT, criAgent+criRT
	var bare time.Duration
	if p, ok := byName["runc-exec"]; ok {
		bare = p.own / time.Duration(p.ops)
	}
	ratio := func(a, b time.Duration) string {
		if b <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", float64(a)/float64(b))
	}
	verdict := func(d time.Duration) string {
		if d <= goalCPU {
			return "meets"
		}
		return "misses"
	}
	fmt.Fprintf(&b, "\ngoal (issue 22): tcp and http <= %.1f ms of agent CPU per probe: tcp %.3f ms (%s), http %.3f ms (%s)\n",
		ms(goalCPU), ms(tcpAgent), verdict(tcpAgent), ms(httpAgent), verdict(httpAgent))
	tcpExact, _ := byName["tcp-exact"].net(idle)
	httpExact, _ := byName["http-exact"].net(idle)
	fmt.Fprintf(&b, "the runner's tick (workers woken every %v, probes due together share a wake-up) against waking each worker when due: tcp %s, http %s of the CPU\n",
		probes.DefaultTick, ratio(tcpAgent, tcpExact), ratio(httpAgent, httpExact))
	fmt.Fprintf(&b, "tcp and http probes also cost the runtime %.3f / %.3f ms each (the container lookup every probe starts with)\n", ms(tcpRT), ms(httpRT))
	fmt.Fprintf(&b, "exec: agent %.3f ms + runtime %.3f ms = %.3f ms per probe; bare CRI ExecSync %.3f ms (agent %.3f); bare runc exec %.3f ms\n",
		ms(execAgent), ms(execRT), ms(execTotal), ms(criTotal), ms(criAgent), ms(bare))
	fmt.Fprintf(&b, "exec probe / bare runc exec: total %s, agent side alone %s; exec probe / bare CRI ExecSync: %s\n",
		ratio(execTotal, bare), ratio(execAgent, bare), ratio(execTotal, criTotal))
	fmt.Print(b.String())

	fmt.Printf("RESULT bench=probecost tcp_cpu_ms=%.3f http_cpu_ms=%.3f tcp_exact_cpu_ms=%.3f http_exact_cpu_ms=%.3f exec_agent_cpu_ms=%.3f exec_total_cpu_ms=%.3f bare_exec_cpu_ms=%.3f exec_ratio=%s"+
		" tcp_runtime_cpu_ms=%.3f http_runtime_cpu_ms=%.3f cri_exec_total_cpu_ms=%.3f goal_cpu_ms=%.1f probes=%d exec_probes=%d seconds=%d\n",
		ms(tcpAgent), ms(httpAgent), ms(tcpExact), ms(httpExact), ms(execAgent), ms(execTotal), ms(bare), ratio(execTotal, bare),
		ms(tcpRT), ms(httpRT), ms(criTotal), ms(goalCPU), n, nExec, int(window/time.Second))
}
