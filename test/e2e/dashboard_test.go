//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// dashboardGlob finds the Grafana dashboards, relative to this package.
const dashboardGlob = "../../deploy/dashboards/*.json"

// dashboardPanel is a panel of a dashboard with its PromQL queries.
type dashboardPanel struct {
	Title   string
	Queries []string
}

// dashboardPanels reads every panel with queries of the dashboard file,
// those nested in rows included.
func dashboardPanels(t *testing.T, file string) []dashboardPanel {
	t.Helper()
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d), file)
	var out []dashboardPanel
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			require.NoError(t, json.Unmarshal(r, &p), file)
			if len(p.Targets) > 0 {
				dp := dashboardPanel{Title: p.Title}
				for _, tg := range p.Targets {
					dp.Queries = append(dp.Queries, tg.Expr)
				}
				out = append(out, dp)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboardAgainstPrometheus: Debian's Prometheus, started by the
// test on loopback, scrapes every agent and coordinator of the cluster
// while the test does the work the dashboard watches: an ImageListPullJob
// of two fresh images (two ImagePullJobs, pulled through the agents'
// swarm), a ContainerRecreateRequest, a PodProbeMarker, a Job whose
// sidecar the terminator stops, an eviction a PodUnavailableBudget
// refuses and a delete deletion protection refuses. Then every query of
// deploy/dashboards is evaluated as Grafana would (with $__rate_interval
// covering the run): every panel must show data (a query with a sample
// that is a number), and every query's result is logged.
func TestDashboardAgainstPrometheus(t *testing.T) {
	t.Parallel()
	f := newFramework(t)
	ctx := t.Context()
	nodes := requireImagePull(ctx, t, f)

	targets := map[string][]string{}
	agents, err := f.AgentPods(ctx)
	require.NoError(t, err)
	require.Len(t, agents, len(nodes), "an agent per node")
	for _, a := range agents {
		targets["shoal-agent"] = append(targets["shoal-agent"], net.JoinHostPort(a.Status.HostIP, framework.AgentMetricsPort))
	}
	coordinators, err := f.Kube.CoreV1().Pods(framework.ShoalNamespace).List(ctx, metav1.ListOptions{LabelSelector: framework.CoordinatorSelector})
	require.NoError(t, err)
	for _, c := range coordinators.Items {
		if c.DeletionTimestamp == nil && c.Status.PodIP != "" {
			targets["shoal-coordinator"] = append(targets["shoal-coordinator"], net.JoinHostPort(c.Status.PodIP, framework.CoordinatorMetricsPort))
		}
	}
	require.NotEmpty(t, targets["shoal-coordinator"], "a coordinator pod with an IP")
	started := time.Now()
	prom := framework.StartPrometheus(t, targets)
	require.NoError(t, prom.WaitTargetsUp(ctx, time.Minute))
	t.Logf("prometheus on %s scrapes %d agents and %d coordinators", prom.URL, len(targets["shoal-agent"]), len(targets["shoal-coordinator"]))

	// Images warmed on every node, through two ImagePullJobs of a list.
	reg := framework.StartRegistry(t, framework.RegistryOptions{})
	images := pushListImages(t, reg, "dashboard")
	createListJob(ctx, t, f, "dashboard", images, func(tpl *v1alpha1.ImagePullJobTemplate) {
		setPull(tpl, len(nodes), 60, 2)
	})

	// A pod whose container is recreated, that a marker probes and a
	// budget covers.
	pod := startCRRPod(ctx, t, f, "dashboard", func(p *corev1.Pod) { p.Labels[pubLabel] = "true" })
	createPPM(ctx, t, f, newPPM("dashboard", pod.Name, v1alpha1.PodContainerProbe{
		Name: "ok", ContainerName: "app", PodConditionType: "e2e.shoal.io/dashboard",
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
		}},
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"probed": "ok"}}},
	}))
	createCRR(ctx, t, f, newCRR("dashboard", pod.Name, "app"))
	waitCRR(ctx, t, f, "dashboard", crrTimeout, "Completed", isCompleted)
	waitProbedPods(ctx, t, f, pod.Name, 1, ppmTimeout, "probe succeeded", labelIs("probed", "ok"))

	// A refused eviction and a refused delete.
	createPub(ctx, t, f, newPub(intstr.FromInt32(0)))
	waitPub(ctx, t, f, "covers the pod", pubCounts{allowed: 0, current: 1, desired: 1, total: 1})
	// The pod webhook fails open (3 s timeout) and is served by every
	// replica; one whose informer has not shown the new budget yet allows
	// a dry run. This test needs a refusal on the dashboard, not the
	// budget's semantics (the PodUnavailableBudget tests pin those): ask
	// until one comes, bounded.
	var evictErr error
	_ = framework.WaitFor(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		evictErr = pubEvict(ctx, f, pod.Name, true)
		return evictErr != nil, nil
	})
	requirePubRefused(t, f, evictErr)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "dashboard", Labels: map[string]string{wellknown.LabelDeleteProtection: string(wellknown.DeletionProtectionAlways)}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": pod.Name}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	_, err = f.Kube.CoreV1().Services(f.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	protectedSvc := newProtected(t, f, corev1.SchemeGroupVersion.WithResource("services"), f.Namespace, svc.Name)
	protectedSvc.refused("is never deleted while the label is there")

	// A Job's sidecar stopped once its main container is done.
	_, err = f.Kube.BatchV1().Jobs(f.Namespace).Create(ctx, sidecarJob(f, "dashboard", 2, trapScript("exit 0"), sidecarEnv), metav1.CreateOptions{})
	require.NoError(t, err)
	waitJob(ctx, t, f, "dashboard", "complete", sidecarJobTimeout, func(j *batchv1.Job) bool {
		c, ok := jobFinished(j)
		return ok && c == batchv1.JobComplete
	})

	waitListJob(ctx, t, f, "dashboard", pullJobTimeout, "completed", func(l *v1alpha1.ImageListPullJob) bool {
		return l.Status.CompletionTime != nil
	})

	// Every panel shows data: polled, since a rate needs two scrapes after
	// the work.
	files, err := filepath.Glob(dashboardGlob)
	require.NoError(t, err)
	require.NotEmpty(t, files, dashboardGlob)
	type outcome struct {
		file, panel, query string
		res                framework.QueryResult
	}
	var results []outcome
	var blank []string
	err = framework.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		window := fmt.Sprintf("%ds", int(time.Since(started).Seconds())+30)
		results, blank = nil, nil
		for _, file := range files {
			for _, p := range dashboardPanels(t, file) {
				shown := false
				for _, q := range p.Queries {
					res, err := prom.Query(ctx, strings.ReplaceAll(q, "$__rate_interval", window))
					if err != nil {
						return false, err // a query Prometheus refuses is a defect, not a wait
					}
					results = append(results, outcome{filepath.Base(file), p.Title, q, res})
					shown = shown || res.Samples > 0
				}
				if !shown {
					blank = append(blank, filepath.Base(file)+": "+p.Title)
				}
			}
		}
		return len(blank) == 0, nil
	})
	var withData int
	for _, r := range results {
		if r.res.Samples > 0 {
			withData++
		}
		t.Logf("%s | %s | %s => %s", r.file, r.panel, r.query, r.res.Text)
	}
	t.Logf("%d of %d queries returned data; panels without data: %d", withData, len(results), len(blank))
	require.NoError(t, err, "panels without data: %s", strings.Join(slices.Compact(blank), "; "))
}
