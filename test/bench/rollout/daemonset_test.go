//go:build bench

package rollout

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1beta1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// Goals of issue 20, for the in-place DaemonSet update with pre-download.
const (
	goalDSUnreadyP50  = 2 * time.Second
	goalRegistryRatio = 1.0 // registry bytes over the new layer's size, about
)

var flagRegistryMiBps = flag.Int("registry-mibps", envInt("SHOAL_BENCH_REGISTRY_MIBPS", 16),
	"MiB/s each blob download from the DaemonSet benchmark's registry may take (env SHOAL_BENCH_REGISTRY_MIBPS; 0: unthrottled)")

// dsResult is one DaemonSet scenario's figures.
type dsResult struct {
	name          string
	total         time.Duration
	unready       map[string]time.Duration // by node
	registryBytes float64
	stages        []podStages // in-place only: where each pod's unready time went
}

// TestDaemonSetRolloutBenchmark updates an Advanced DaemonSet on every
// node of the local cluster to a new image no node has (the test server
// plus a random layer of SHOAL_BENCH_LAYER_MIB), served by a registry the
// benchmark runs on one of the cluster's mirrored test registry addresses,
// throttled to SHOAL_BENCH_REGISTRY_MIBPS per blob download as a remote
// registry would be, two ways in one run:
// rollingUpdateType Standard without pre-download (the annotation
// apps.kruise.io/image-predownload-parallelism "0" turns it off), and
// InPlaceIfPossible with pre-download (maxUnavailable 1 both). It reports
// the total time, each node's unready time (from its pod leaving Ready to
// a pod on that node being Ready again) and the blob bytes the registry
// served (the nodes pull through their agent, the registry mirror, so the
// swarm fetches each layer once). For the in-place run it also prints, per
// pod, when each step of the update showed (stageWatch): where the unready
// time goes.
//
//	make bench-daemonset   (the cluster must run Shoal)
func TestDaemonSetRolloutBenchmark(t *testing.T) {
	var results []dsResult
	for _, sc := range []struct {
		name    string
		inPlace bool
	}{{"standard-no-predownload", false}, {"inplace-predownload", true}} {
		t.Run(sc.name, func(t *testing.T) { results = append(results, runDaemonSet(t, sc.name, sc.inPlace)) })
	}
	require.Len(t, results, 2)
	layer := float64(*flagLayerMiB) * (1 << 20)
	fmt.Printf("\nAdvanced DaemonSet update on every node to a new image with a %d MiB random layer (registry %d MiB/s per download):\n", *flagLayerMiB, *flagRegistryMiBps)
	fmt.Printf("%-26s %8s %14s %14s %18s\n", "scenario", "total", "unready p50", "unready max", "registry MiB (x)")
	for _, r := range results {
		var ds []time.Duration
		for _, d := range r.unready {
			ds = append(ds, d)
		}
		fmt.Printf("%-26s %8s %14s %14s %12.1f (%.2f)\n", r.name, r.total.Round(100*time.Millisecond),
			percentile(ds, 50).Round(10*time.Millisecond), percentile(ds, 100).Round(10*time.Millisecond), r.registryBytes/(1<<20), r.registryBytes/layer)
		nodes := make([]string, 0, len(r.unready))
		for n := range r.unready {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			fmt.Printf("    %-22s unready %s\n", n, r.unready[n].Round(10*time.Millisecond))
		}
		fmt.Print(formatStages(r.stages))
		fmt.Printf("RESULT bench=daemonset scenario=%s nodes=%d layer_mib=%d total_s=%.1f unready_p50_s=%.2f unready_max_s=%.2f registry_mib=%.1f registry_x=%.2f\n",
			r.name, len(r.unready), *flagLayerMiB, r.total.Seconds(), percentile(ds, 50).Seconds(), percentile(ds, 100).Seconds(), r.registryBytes/(1<<20), r.registryBytes/layer)
	}
	fmt.Printf("\nin-place + pre-download: unready p50 goal <= %s, registry bytes goal about %.0fx the layer\n", goalDSUnreadyP50, goalRegistryRatio)
}

// runDaemonSet creates the DaemonSet at testserver:latest, waits for it,
// rolls it to a fresh image and measures.
func runDaemonSet(t *testing.T, scenario string, inPlace bool) dsResult {
	f := framework.New(t)
	ctx := t.Context()
	reg := framework.StartRegistry(t, framework.RegistryOptions{BytesPerSecond: int64(*flagRegistryMiBps) << 20})
	image := pushFreshImageTo(ctx, t, f, reg.Ref("testserver", fmt.Sprintf("bench-ds-%s-%d", scenario, time.Now().UnixNano())))
	labels := map[string]string{"app": "bench-ds"}
	policy := v1beta1.StandardRollingUpdateType
	annotations := map[string]string{wellknown.AnnotationImagePreDownloadParallelism: "0"}
	if inPlace {
		policy, annotations = v1beta1.InplaceRollingUpdateType, map[string]string{wellknown.AnnotationImagePreDownloadParallelism: "3"}
	}
	ds := &v1beta1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Annotations: annotations},
		Spec: v1beta1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
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
			},
			UpdateStrategy: v1beta1.DaemonSetUpdateStrategy{Type: v1beta1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &v1beta1.RollingUpdateDaemonSet{
				Type: policy, MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
		},
	}
	_, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, waitDaemonSet(ctx, f, ""), "the first rollout")

	w := watchPods(ctx, t, f, "bench-ds")
	sw := watchStages(ctx, t, f, "bench-ds", image)
	before := servedBytes(reg)
	start := time.Now()
	patchImage(ctx, t, func() error {
		cur, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Get(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Template.Spec.Containers[0].Image = image
		_, err = f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, waitDaemonSet(ctx, f, image), "the image rollout")
	r := dsResult{name: scenario, total: time.Since(start), unready: unreadyByNode(w.stop()), stages: sw.stop()}
	r.registryBytes = servedBytes(reg) - before
	require.NotEmpty(t, r.unready, "pods went unready and back")
	t.Logf("%s: total %s, unready by node %v, registry bytes %.0f", scenario, r.total, r.unready, r.registryBytes)
	return r
}

// waitDaemonSet waits until every desired node runs an available pod of
// image (any image when "").
func waitDaemonSet(ctx context.Context, f *framework.Framework, image string) error {
	return framework.WaitFor(ctx, rolloutTimeout, func(ctx context.Context) (bool, error) {
		ds, err := f.Shoal.AppsV1beta1().DaemonSets(f.Namespace).Get(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := ds.Status
		if s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled == 0 || s.UpdatedNumberScheduled != s.DesiredNumberScheduled ||
			s.NumberAvailable != s.DesiredNumberScheduled {
			return false, nil
		}
		if image == "" {
			return true, nil
		}
		pods, err := f.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=bench-ds"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, nil // an old pod still going
			}
			if p.Spec.Containers[0].Image == image && serving(&p) {
				n++
			}
		}
		return n == int(s.DesiredNumberScheduled), nil
	})
}

// unreadyByNode sums, per node, the time from its pod leaving service
// to a pod on that node serving again.
func unreadyByNode(ts []transition) map[string]time.Duration {
	out := map[string]time.Duration{}
	stopped := map[string]time.Time{}
	for _, tr := range ts {
		at, down := stopped[tr.node]
		switch {
		case !tr.serving && !down:
			stopped[tr.node] = tr.at
		case tr.serving && down:
			out[tr.node] += tr.at.Sub(at)
			delete(stopped, tr.node)
		}
	}
	return out
}

// servedBytes sums the blob bytes reg served.
func servedBytes(reg *framework.Registry) float64 {
	var sum float64
	for _, n := range reg.BlobBytes() {
		sum += float64(n)
	}
	return sum
}
