//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// The soak (make soak; a 2-minute run of it in make test) runs the
// node-first features side by side for SHOAL_SOAK_MINUTES while a seeded
// random schedule of faults hits the cluster, and checks invariants as it
// goes: nothing is lost, nothing is done twice, no Shoal component dies
// unless the schedule killed it.
//
// Environment:
//   - SHOAL_SOAK_MINUTES: how long new work is started (default 2);
//   - SHOAL_SOAK_SEED: the fault schedule's seed (default: the clock;
//     the summary prints it, and the same seed gives the same schedule);
//   - SHOAL_SOAK_FAULTS: a comma-separated subset of the fault kinds;
//   - SHOAL_SOAK_DEFECT=forget-agent-state: agents keep their state dir
//     in an emptyDir, so a killed agent comes back without its work. The
//     soak must catch it (the run that shows the soak can fail).

// Fault kinds of the schedule.
const (
	faultAgentKill         = "agent-kill"
	faultLeaderKill        = "leader-kill"
	faultNodeCut           = "node-cut"
	faultRegistryBurst     = "registry-burst"
	faultContainerdRestart = "containerd-restart"
)

var allFaults = []string{faultAgentKill, faultLeaderKill, faultNodeCut, faultRegistryBurst, faultContainerdRestart}

// Invariants the soak checks.
const (
	invCRREnds        = "every CRR ends Completed, or Failed with a reason"
	invCRRRestarts    = "no container restarts more often than CRRs asked"
	invPullEnds       = "every ImagePullJob ends"
	invPullVerified   = "every pulled image is in its node's runtime under its digest"
	invPullUpstream   = "upstream bytes per ImagePullJob <= 1.5 copies"
	invInPlace        = "every CloneSet update rolls out in place"
	invProbeFlip      = "every probe flip reaches its pod"
	invAgentResumes   = "a restarted agent resumes the work it held"
	invShoalPods      = "no Shoal pod restarted but those the schedule killed"
	soakDefectNoState = "forget-agent-state"
)

// Bounds of the soak's waits: generous, as faults come on top.
const (
	soakOpTimeout     = 5 * time.Minute // one CRR, pull job, rollout
	soakProbeTimeout  = 90 * time.Second
	soakRecoverWithin = 3 * time.Minute // a fault's target back to normal
	soakCutFor        = 30 * time.Second
)

// soakParams are the soak's settings, from the environment.
type soakParams struct {
	d      time.Duration
	seed   int64
	faults []string
	defect string
}

func soakParamsFromEnv(t *testing.T) soakParams {
	p := soakParams{d: 2 * time.Minute, seed: time.Now().UnixNano(), faults: allFaults, defect: os.Getenv("SHOAL_SOAK_DEFECT")}
	if v := os.Getenv("SHOAL_SOAK_MINUTES"); v != "" {
		m, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, "SHOAL_SOAK_MINUTES=%q", v)
		p.d = time.Duration(m * float64(time.Minute))
	}
	if v := os.Getenv("SHOAL_SOAK_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "SHOAL_SOAK_SEED=%q", v)
		p.seed = s
	}
	if v := os.Getenv("SHOAL_SOAK_FAULTS"); v != "" {
		p.faults = strings.Split(v, ",")
		for _, k := range p.faults {
			require.Contains(t, allFaults, k, "SHOAL_SOAK_FAULTS names an unknown fault kind")
		}
	}
	require.Contains(t, []string{"", soakDefectNoState}, p.defect, "SHOAL_SOAK_DEFECT")
	return p
}

// soakReport is what the soak did and found; safe for concurrent use.
type soakReport struct {
	mu         sync.Mutex
	start      time.Time
	ops        map[string]int
	checks     map[string]int
	faults     []string
	violations []string
	killed     map[string]bool // Shoal pods the schedule killed
}

func newSoakReport() *soakReport {
	return &soakReport{start: time.Now(), ops: map[string]int{}, checks: map[string]int{}, killed: map[string]bool{}}
}

func (r *soakReport) since() string {
	d := time.Since(r.start).Round(time.Second)
	return fmt.Sprintf("%02d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// op counts an operation done.
func (r *soakReport) op(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[name]++
}

// check counts a check of inv; a non-nil err is a violation.
func (r *soakReport) check(inv string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[inv]++
	if err != nil {
		r.violations = append(r.violations, fmt.Sprintf("%s %s: %v", r.since(), inv, err))
	}
}

// fault records an injected fault.
func (r *soakReport) fault(kind, target string, took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := fmt.Sprintf("%s %-18s %-16s back in %s", r.since(), kind, target, took.Round(100*time.Millisecond))
	if err != nil {
		line += " (recovery: " + err.Error() + ")"
	}
	r.faults = append(r.faults, line)
}

func (r *soakReport) kill(pod string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killed[pod] = true
}

// print writes the summary.
func (r *soakReport) print(w io.Writer, p soakParams) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "\nsoak summary: %s of new work, seed %d (SHOAL_SOAK_SEED=%d repeats the schedule), defect %q, ran %s\n",
		p.d, p.seed, p.seed, p.defect, time.Since(r.start).Round(time.Second))
	fmt.Fprintf(w, "faults injected (%d):\n", len(r.faults))
	for _, f := range r.faults {
		fmt.Fprintf(w, "  %s\n", f)
	}
	fmt.Fprintln(w, "operations done:")
	for _, k := range slices.Sorted(maps.Keys(r.ops)) {
		fmt.Fprintf(w, "  %-48s %d\n", k, r.ops[k])
	}
	fmt.Fprintln(w, "invariants (times checked):")
	for _, inv := range []string{invCRREnds, invCRRRestarts, invPullEnds, invPullVerified, invPullUpstream, invInPlace, invProbeFlip, invAgentResumes, invShoalPods} {
		fmt.Fprintf(w, "  %-66s %d\n", inv, r.checks[inv])
	}
	fmt.Fprintf(w, "violations: %d\n", len(r.violations))
	for _, v := range r.violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
}

// soak is one run's state, shared by its workers.
type soak struct {
	t      *testing.T
	f      *framework.Framework
	cfg    *cluster.Config
	p      soakParams
	rep    *soakReport
	nodes  []corev1.Node
	reg    *framework.Registry
	images []string // pushed before the start, one per pull job
	// csImages are testserver under new tags, one per CloneSet update.
	csImages []string
	until    time.Time
}

// TestSoak: see the comment at the top of the file.
func TestSoak(t *testing.T) {
	serial(t)
	f := newFramework(t)
	cfg := localCluster(t, f)
	ctx := t.Context()
	p := soakParamsFromEnv(t)
	s := &soak{t: t, f: f, cfg: cfg, p: p, rep: newSoakReport()}
	// The summary, also when the soak stops early.
	defer func() {
		var b strings.Builder
		s.rep.print(&b, p)
		t.Log(b.String())
		if path := os.Getenv("SHOAL_SOAK_SUMMARY"); path != "" {
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Errorf("write the soak summary: %v", err)
			}
		}
	}()
	s.nodes = requireImagePull(ctx, t, f)
	require.GreaterOrEqual(t, len(s.nodes), 2, "the soak needs 2 nodes")
	if p.defect == soakDefectNoState {
		s.forgetAgentState(ctx)
	}
	before := s.shoalPods(ctx)

	// Work that runs for the whole soak.
	s.reg = framework.StartRegistry(t, framework.RegistryOptions{})
	t.Cleanup(func() { s.reg.FailWith(0) })
	for i := range int(p.d/(15*time.Second)) + 2 {
		s.images = append(s.images, s.reg.Push(t, "soak/app", fmt.Sprintf("v%d", i), 1, 2))
	}
	s.waitMirrors(ctx)
	crrPods := s.startCRRPods(ctx)
	probePods := s.startProbePods(ctx)
	cs := s.startCloneSet(ctx)

	s.until = time.Now().Add(p.d)
	t.Logf("soak: new work for %s, faults %v, seed %d", p.d, p.faults, p.seed)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.pulls(gctx) })
	g.Go(func() error { return s.crrs(gctx, crrPods) })
	g.Go(func() error { return s.rollouts(gctx, cs) })
	g.Go(func() error { return s.probeFlips(gctx, probePods) })
	g.Go(func() error { return s.faults(gctx) })
	require.NoError(t, g.Wait())

	s.checkShoalPods(ctx, before)
	s.rep.mu.Lock()
	violations := slices.Clone(s.rep.violations)
	s.rep.mu.Unlock()
	require.Empty(t, violations, "the soak found violations (summary above)")
}

// agentMirrorEndpoint is where the agents serve their node's runtime
// (--mirror-port on loopback).
const agentMirrorEndpoint = "127.0.0.1:30021"

// waitMirrors waits until every node's hosts.toml for the soak's registry
// sends pulls through the node's agent. The agent puts its block back
// within a minute when something rewrites the file (shoal-cluster up does,
// on a running cluster, as make soak runs it); until then the runtime
// would pull around the swarm.
func (s *soak) waitMirrors(ctx context.Context) {
	for _, n := range s.nodes {
		path := cluster.RegistryHostsFile(s.cfg, n.Name, s.reg.Host)
		var last string
		err := framework.WaitFor(ctx, 2*time.Minute, func(context.Context) (bool, error) {
			data, err := os.ReadFile(path)
			last = string(data)
			return err == nil && strings.Contains(last, agentMirrorEndpoint), nil
		})
		require.NoError(s.t, err, "the agent on %s does not mirror %s: %s holds %q", n.Name, s.reg.Host, path, last)
	}
}
