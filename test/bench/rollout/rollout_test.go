//go:build bench

// Package rollout measures an image rollout of N pods on the local
// cluster, three ways, in one run:
//
//   - a native Deployment (maxUnavailable 20%, maxSurge 0);
//   - a CloneSet with podUpdatePolicy ReCreate (maxUnavailable 20%);
//   - a CloneSet with podUpdatePolicy InPlaceIfPossible (maxUnavailable
//     20%), whose pre-download ImagePullJob warms the new image first.
//
// Each rolls to its own new image, pushed by the benchmark: the testserver
// image plus a layer of random bytes (SHOAL_BENCH_LAYER_MIB, default 32),
// so no node has it before. For each it reports the total rollout time
// (the update until every pod runs the new image and is available), the
// per-pod unready time (each moment a serving pod stopped serving, paired
// in order with the next moment a pod started serving; p50 and p99), and
// the coordinator's API writes per updated pod (its successful POST, PUT,
// PATCH and DELETE requests from shoal_coordinator_api_requests_total;
// events listed apart, leader-election leases and refused writes left out).
//
//	make bench-rollout   (or hack/bench-rollout.sh; the cluster must run Shoal)
package rollout

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/internal/ociimage"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

var (
	flagPods     = flag.Int("pods", envInt("SHOAL_BENCH_ROLLOUT_PODS", 30), "pods per workload (env SHOAL_BENCH_ROLLOUT_PODS)")
	flagLayerMiB = flag.Int("layer-mib", envInt("SHOAL_BENCH_LAYER_MIB", 32), "MiB of random layer in each new image (env SHOAL_BENCH_LAYER_MIB)")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// Goals of issue 19, for the in-place rollout.
const (
	goalRatio         = 1.0 / 3 // its total time over the Deployment's
	goalUnreadyP50    = 2 * time.Second
	goalWritesPerPod  = 3.0
	pollEvery         = 200 * time.Millisecond
	rolloutTimeout    = 15 * time.Minute
	maxUnavailablePct = "20%"
)

// result is one scenario's figures.
type result struct {
	name              string
	total             time.Duration
	unreadyP50, unP99 time.Duration
	writes, events    float64
	refused           float64
	writesByResource  map[string]float64
	coordinatorWrites bool
}

func TestRolloutBenchmark(t *testing.T) {
	n := *flagPods
	require.Positive(t, n)
	var results []result
	for _, sc := range []struct {
		name string
		kind string // deployment, recreate, inplace
	}{{"deployment", "deployment"}, {"cloneset-recreate", "recreate"}, {"cloneset-inplace-predownload", "inplace"}} {
		t.Run(sc.name, func(t *testing.T) {
			results = append(results, runScenario(t, sc.name, sc.kind, n))
		})
	}
	require.Len(t, results, 3)

	fmt.Printf("\nRollout of %d pods on the local cluster, each to a new image with a %d MiB random layer:\n", n, *flagLayerMiB)
	fmt.Printf("%-30s %10s %12s %12s %14s %10s\n", "scenario", "total", "unready p50", "unready p99", "writes/pod", "events/pod")
	for _, r := range results {
		writes, events := "n/a", "n/a"
		if r.coordinatorWrites {
			writes, events = fmt.Sprintf("%.2f", r.writes/float64(n)), fmt.Sprintf("%.2f", r.events/float64(n))
		}
		fmt.Printf("%-30s %10s %12s %12s %14s %10s\n", r.name, r.total.Round(100*time.Millisecond), r.unreadyP50.Round(10*time.Millisecond),
			r.unP99.Round(10*time.Millisecond), writes, events)
	}
	dep, inplace := results[0], results[2]
	ratio := inplace.total.Seconds() / dep.total.Seconds()
	fmt.Printf("\nin-place / Deployment total time: %.2f (goal <= %.2f)\n", ratio, goalRatio)
	fmt.Printf("in-place unready p50: %s (goal <= %s)\n", inplace.unreadyP50.Round(10*time.Millisecond), goalUnreadyP50)
	fmt.Printf("in-place coordinator writes per pod: %.2f (goal <= %.0f), by resource: %v\n", inplace.writes/float64(n), goalWritesPerPod, perPod(inplace.writesByResource, n))
	for _, r := range results {
		fmt.Printf("RESULT bench=rollout scenario=%s pods=%d layer_mib=%d total_s=%.1f unready_p50_s=%.2f unready_p99_s=%.2f writes_per_pod=%.2f events_per_pod=%.2f\n",
			r.name, n, *flagLayerMiB, r.total.Seconds(), r.unreadyP50.Seconds(), r.unP99.Seconds(), r.writes/float64(n), r.events/float64(n))
	}
}

func perPod(m map[string]float64, n int) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprintf("%.2f", v/float64(n))
	}
	return out
}

// runScenario creates the workload at testserver:latest, waits for it,
// rolls it to a fresh image and measures.
func runScenario(t *testing.T, scenario, kind string, n int) result {
	f := framework.New(t)
	ctx := t.Context()
	image := pushFreshImage(ctx, t, f, scenario)
	labels := map[string]string{"app": "bench"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	maxUnavailable := intstr.FromString(maxUnavailablePct)
	switch kind {
	case "deployment":
		_, err := f.Kube.AppsV1().Deployments(f.Namespace).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl,
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: &maxUnavailable, MaxSurge: ptr.To(intstr.FromInt32(0)),
				}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	default:
		policy := v1beta1.RecreateCloneSetPodUpdateStrategyType
		if kind == "inplace" {
			policy = v1beta1.InPlaceIfPossibleCloneSetPodUpdateStrategyType
		}
		_, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Create(ctx, &v1beta1.CloneSet{
			ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			Spec: v1beta1.CloneSetSpec{
				Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl,
				UpdateStrategy: v1beta1.CloneSetUpdateStrategy{Type: v1beta1.RollingUpdateCloneSetUpdateStrategyType,
					RollingUpdate: &v1beta1.RollingUpdateCloneSetStrategy{PodUpdatePolicy: policy, MaxUnavailable: &maxUnavailable}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, waitDone(ctx, f, kind, n, ""), "the first rollout")

	w := watchPods(ctx, t, f, "bench")
	before := scrapeWrites(ctx, t, f)
	start := time.Now()
	switch kind {
	case "deployment":
		patchImage(ctx, t, func() error {
			d, err := f.Kube.AppsV1().Deployments(f.Namespace).Get(ctx, "bench", metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].Image = image
			_, err = f.Kube.AppsV1().Deployments(f.Namespace).Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
	default:
		patchImage(ctx, t, func() error {
			cs, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "bench", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cs.Spec.Template.Spec.Containers[0].Image = image
			_, err = f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Update(ctx, cs, metav1.UpdateOptions{})
			return err
		})
	}
	require.NoError(t, waitDone(ctx, f, kind, n, image), "the image rollout")
	total := time.Since(start)
	after := scrapeWrites(ctx, t, f)
	stops, starts := stopsAndStarts(w.stop(), start)
	unready := pair(stops, starts)
	require.NotEmpty(t, unready, "pods went unready and back")

	r := result{name: scenario, total: total, writesByResource: map[string]float64{}, coordinatorWrites: kind != "deployment"}
	r.unreadyP50, r.unP99 = percentile(unready, 50), percentile(unready, 99)
	for k, v := range after {
		d := v - before[k]
		if d <= 0 {
			continue
		}
		switch {
		case strings.HasPrefix(k, "refused:"):
			r.refused += d
			continue
		case strings.HasPrefix(k, "events"), strings.HasPrefix(k, "leases"):
			// Events are asynchronous records; leases are leader
			// election, whatever the rollout does.
			if strings.HasPrefix(k, "events") {
				r.events += d
			}
			continue
		}
		r.writes += d
		r.writesByResource[k] += d
	}
	t.Logf("%s: total %s, unready p50 %s p99 %s over %d intervals, coordinator writes %v, events %.0f, refused writes %.0f",
		scenario, total, r.unreadyP50, r.unP99, len(unready), r.writesByResource, r.events, r.refused)
	return r
}

// patchImage retries a read-modify-write on conflicts.
func patchImage(ctx context.Context, t *testing.T, update func() error) {
	t.Helper()
	err := framework.WaitFor(ctx, 30*time.Second, func(context.Context) (bool, error) { return update() == nil, nil })
	require.NoError(t, err, "update the image")
}

// waitDone waits until every one of n pods runs image (any image when
// "") and is available, as the workload's status says.
func waitDone(ctx context.Context, f *framework.Framework, kind string, n int, image string) error {
	return framework.WaitFor(ctx, rolloutTimeout, func(ctx context.Context) (bool, error) {
		switch kind {
		case "deployment":
			d, err := f.Kube.AppsV1().Deployments(f.Namespace).Get(ctx, "bench", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := d.Status
			if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != int32(n) || s.AvailableReplicas != int32(n) || s.Replicas != int32(n) {
				return false, nil
			}
		default:
			cs, err := f.Shoal.AppsV1beta1().CloneSets(f.Namespace).Get(ctx, "bench", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := cs.Status
			if s.ObservedGeneration < cs.Generation || s.UpdatedReplicas != int32(n) || s.AvailableReplicas != int32(n) ||
				s.Replicas != int32(n) || s.CurrentRevision != s.UpdateRevision {
				return false, nil
			}
		}
		if image == "" {
			return true, nil
		}
		pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=bench"})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == image {
				running++
			}
		}
		return running == n, nil
	})
}

// pushFreshImage pushes testserver:latest plus a layer of random bytes as
// testserver:bench-<scenario>-<time> to the cluster's registry and returns
// its reference.
func pushFreshImage(ctx context.Context, t *testing.T, f *framework.Framework, scenario string) string {
	t.Helper()
	return pushFreshImageTo(ctx, t, f, f.Image(fmt.Sprintf("testserver:bench-%s-%d", scenario, time.Now().UnixNano())))
}

// pushFreshImageTo pushes testserver:latest plus a layer of random bytes
// as ref.
func pushFreshImageTo(ctx context.Context, t *testing.T, f *framework.Framework, ref string) string {
	t.Helper()
	base, err := name.ParseReference(f.Image("testserver:latest"), name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(base, remote.WithContext(ctx))
	require.NoError(t, err)
	layer, err := random.Layer(int64(*flagLayerMiB)<<20, types.DockerLayer)
	require.NoError(t, err)
	img, err = mutate.AppendLayers(img, layer)
	require.NoError(t, err)
	require.NoError(t, ociimage.Push(ctx, ref, img))
	return ref
}

// transition is a pod of the watched set starting or stopping to serve.
type transition struct {
	at      time.Time
	node    string
	serving bool
}

// podWatch records the serving transitions of the namespace's pods of
// label selector app=<app>.
type podWatch struct {
	mu          sync.Mutex
	ready       map[string]bool // by pod UID
	transitions []transition
	stopWatch   func()
}

// watchPods starts recording the readiness changes of the pods labelled
// app=<app>.
func watchPods(ctx context.Context, t *testing.T, f *framework.Framework, app string) *podWatch {
	t.Helper()
	w := &podWatch{ready: map[string]bool{}}
	w.stopWatch = watchAppPods(ctx, t, f, app,
		func(p *corev1.Pod) { w.ready[string(p.UID)] = serving(p) },
		func(ev watch.EventType, p *corev1.Pod) {
			is := ev != watch.Deleted && serving(p)
			w.mu.Lock()
			defer w.mu.Unlock()
			if was := w.ready[string(p.UID)]; was != is {
				w.transitions = append(w.transitions, transition{at: time.Now(), node: p.Spec.NodeName, serving: is})
			}
			w.ready[string(p.UID)] = is
		})
	return w
}

// stop ends the watch and returns the transitions, oldest first.
func (w *podWatch) stop() []transition {
	w.stopWatch()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.transitions
}

// watchAppPods lists the namespace's pods labelled app=<app> and hands
// each to seed, then watches them from that list on and hands every change
// to each, in order, from one goroutine. The returned stop ends the watch
// and waits for the last call.
func watchAppPods(ctx context.Context, t *testing.T, f *framework.Framework, app string, seed func(*corev1.Pod), each func(watch.EventType, *corev1.Pod)) (stop func()) {
	t.Helper()
	selector := "app=" + app
	list, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	for i := range list.Items {
		seed(&list.Items[i])
	}
	wctx, cancel := context.WithCancel(ctx)
	watcher, err := f.Kube.CoreV1().Pods(f.Namespace).Watch(wctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				each(ev.Type, p)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// stopsAndStarts are the times pods stopped and started serving since.
func stopsAndStarts(ts []transition, since time.Time) (stops, starts []time.Time) {
	for _, tr := range ts {
		switch {
		case tr.at.Before(since):
		case tr.serving:
			starts = append(starts, tr.at)
		default:
			stops = append(stops, tr.at)
		}
	}
	return stops, starts
}

// serving reports whether the pod is Ready and not being deleted.
func serving(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pair pairs the i-th stop with the i-th start (both sorted) and returns
// the unready times.
func pair(stops, starts []time.Time) []time.Duration {
	slices.SortFunc(stops, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	var out []time.Duration
	for i := range min(len(stops), len(starts)) {
		out = append(out, max(starts[i].Sub(stops[i]), 0))
	}
	return out
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// scrapeWrites reads the coordinator leader's write counts by resource
// (framework.Clients.CoordinatorWrites).
func scrapeWrites(ctx context.Context, t *testing.T, f *framework.Framework) map[string]float64 {
	t.Helper()
	out, err := f.CoordinatorWrites(ctx)
	require.NoError(t, err)
	return out
}
