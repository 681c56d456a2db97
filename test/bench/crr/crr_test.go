//go:build bench

// Package crr measures ContainerRecreateRequests on the local cluster: the
// time from creating a request to seeing it Completed, for requests made
// one after another with a random pause before each (one container, no
// preStop hook, minStartedSeconds 0),
// and where that time goes, from the coordinator's stage histograms.
//
//	make bench-crr   (or hack/bench-crr.sh; the cluster must run Shoal)
package crr

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

var flagN = flag.Int("requests", envInt("SHOAL_BENCH_CRRS", 20), "requests to time (env SHOAL_BENCH_CRRS)")

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// Goals of issue 17 (issue 5 asked for 2 s and 5 s).
const (
	goalP50 = 800 * time.Millisecond
	goalP95 = 1200 * time.Millisecond
)

// stages are the coordinator's stage histogram labels, in order.
var stages = []string{"dispatch", "prestop", "stop", "restart", "report"}

func TestCRRBenchmark(t *testing.T) {
	n := *flagN
	require.Positive(t, n)
	f := framework.New(t)
	ctx := t.Context()

	// n pods, spread by the scheduler, each with one plain container.
	for i := range n {
		_, err := f.Kube.CoreV1().Pods(f.Namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "bench"}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: new(int64(5)),
				Containers:                    []corev1.Container{{Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := f.WaitForPodsReady(ctx, f.Namespace, "app=bench", n, 5*time.Minute)
	require.NoError(t, err)

	before := scrapeStages(ctx, t, f)
	crrs := f.Shoal.AppsV1alpha1().ContainerRecreateRequests(f.Namespace)
	var totals, admissions []time.Duration
	// A random pause before each request (uniform in [0, 1 s)) makes the
	// requests arrive at random points of the kubelets' 1 s relist, as a
	// user's do. Without it, each request starts a fixed time after the
	// previous one ended, which is itself tied to a relist: the run locks
	// to one phase of the relist clock, and its p50 swung between 324 and
	// 841 ms from run to run on the same build.
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("arrival pauses from seed %d", seed)
	for i := range n {
		pause := time.NewTimer(time.Duration(rng.Int64N(int64(time.Second))))
		select {
		case <-ctx.Done():
			pause.Stop()
			t.Fatal(ctx.Err())
		case <-pause.C:
		}
		name := fmt.Sprintf("r-%d", i)
		w, err := crrs.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		require.NoError(t, err)
		start := time.Now()
		_, err = crrs.Create(ctx, &v1alpha1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ContainerRecreateRequestSpec{
				PodName:    fmt.Sprintf("web-%d", i),
				Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		admissions = append(admissions, time.Since(start))
		total, err := waitCompleted(ctx, w, start, time.Minute)
		w.Stop()
		require.NoError(t, err, "request %s", name)
		totals = append(totals, total)
	}
	after := scrapeStages(ctx, t, f)

	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	p50, p95 := p(totals, 0.5), p(totals, 0.95)
	t.Logf("ContainerRecreateRequest, create -> Completed, %d requests one after another, each after a random pause (1 container, no preStop, minStartedSeconds 0):", n)
	t.Logf("  p50 %8.0f ms   goal <= %v: %s", ms(p50), goalP50, met(p50 <= goalP50))
	t.Logf("  p95 %8.0f ms   goal <= %v: %s", ms(p95), goalP95, met(p95 <= goalP95))
	t.Logf("  max %8.0f ms", ms(p(totals, 1)))
	t.Logf("where the time goes (means over the run):")
	t.Logf("  %-10s %8.1f ms  (create call, through the webhooks; p50 %.1f ms)", "admission", ms(mean(admissions)), ms(p(admissions, 0.5)))
	result := fmt.Sprintf("RESULT bench=crr requests=%d p50_ms=%.0f p95_ms=%.0f max_ms=%.0f admission_ms=%.1f", n, ms(p50), ms(p95), ms(p(totals, 1)), ms(mean(admissions)))
	for _, s := range stages {
		d := after[s].sub(before[s])
		t.Logf("  %-10s %8.1f ms  (%d observations)", s, d.meanMillis(), d.count)
		result += fmt.Sprintf(" %s_ms=%.1f", s, d.meanMillis())
	}
	t.Logf("  (dispatch: work handed to the node -> its first report; prestop/stop/restart: timed by the agent;")
	t.Logf("   restart: the stop -> the kubelet's new instance running; report: the final report -> status written)")
	t.Log(result + fmt.Sprintf(" goal_p50_ms=%d goal_p95_ms=%d", goalP50.Milliseconds(), goalP95.Milliseconds()))
}

func mean(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

// waitCompleted returns when w shows the request Completed, as the time
// since start.
func waitCompleted(ctx context.Context, w watch.Interface, start time.Time, timeout time.Duration) (time.Duration, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timer.C:
			return 0, fmt.Errorf("not Completed within %s", timeout)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, fmt.Errorf("watch closed")
			}
			if c, isCRR := ev.Object.(*v1alpha1.ContainerRecreateRequest); isCRR && c.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted {
				for _, s := range c.Status.ContainerRecreateStates {
					if s.Phase != v1alpha1.ContainerRecreateRequestSucceeded {
						return 0, fmt.Errorf("completed with container %s %s: %s", s.Name, s.Phase, s.Message)
					}
				}
				return time.Since(start), nil
			}
		}
	}
}

// hist is a histogram's sum and count.
type hist struct {
	sum   float64
	count uint64
}

func (h hist) sub(o hist) hist { return hist{sum: h.sum - o.sum, count: h.count - o.count} }

func (h hist) meanMillis() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count) * 1000
}

// scrapeStages reads the leader's stage histograms.
func scrapeStages(ctx context.Context, t *testing.T, f *framework.Framework) map[string]hist {
	t.Helper()
	leader, err := f.CoordinatorLeader(ctx)
	require.NoError(t, err)
	m, err := framework.Scrape(ctx, framework.CoordinatorURL(leader))
	require.NoError(t, err)
	out := map[string]hist{}
	fam := m["shoal_coordinator_crr_stage_seconds"]
	if fam == nil {
		return out
	}
	for _, s := range fam.GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "stage" {
				out[l.GetValue()] = hist{sum: s.GetHistogram().GetSampleSum(), count: s.GetHistogram().GetSampleCount()}
			}
		}
	}
	return out
}
