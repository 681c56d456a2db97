//go:build bench

// Package distribution benchmarks the ResourceDistribution controller at
// scale on the local cluster: one Secret into hundreds of namespaces.
package distribution

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	"github.com/shoal-io/shoal/protocol/apis/wellknown"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// goalWritesPerNamespace is issue 24's goal: at most one API write per
// namespace per change.
const goalWritesPerNamespace = 1.0

var (
	flagNamespaces = flag.Int("namespaces", envInt("SHOAL_BENCH_NAMESPACES", 500), "namespaces to distribute to (env SHOAL_BENCH_NAMESPACES)")
	flagWorkers    = flag.Int("workers", 16, "concurrent writers of the baseline (a script copying the Secret itself)")
)

// envInt reads an integer from the environment, def when unset.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// secretName is the distributed Secret's name; the baseline's is
// secretName+"-baseline".
const secretName = "bench-distribution"

// secretJSON is the distributed Secret with data v=value.
func secretJSON(value string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"` + secretName + `"},"type":"Opaque","data":{"v":"` +
		base64.StdEncoding.EncodeToString([]byte(value)) + `"}}`)
}

// TestResourceDistributionBenchmark distributes a Secret to
// SHOAL_BENCH_NAMESPACES labelled namespaces, then changes it, and reports
// for each step the time until every copy is right and the coordinator's
// API writes per namespace; as the baseline, the same number of
// concurrent client writers (-workers) creates and updates a Secret in
// every namespace, in the same run.
//
//	make bench-distribution   (the cluster must run Shoal)
func TestResourceDistributionBenchmark(t *testing.T) {
	f := framework.New(t)
	ctx := t.Context()
	run := utilrand.String(6)
	label := "shoal-bench-rd"
	n := *flagNamespaces

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("rdb-%s-%d", run, i)
	}
	t.Cleanup(func() { deleteNamespaces(t, f, names) })
	start := time.Now()
	parallel(t, names, *flagWorkers, func(ns string) error {
		_, err := f.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{label: run}}}, metav1.CreateOptions{})
		return err
	})
	t.Logf("created %d namespaces in %s", n, time.Since(start).Round(time.Millisecond))

	// Baseline: a client that writes every copy itself.
	start = time.Now()
	parallel(t, names, *flagWorkers, func(ns string) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName + "-baseline"}, StringData: map[string]string{"v": "1"}}
		_, err := f.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		return err
	})
	baseCreate := time.Since(start)
	start = time.Now()
	parallel(t, names, *flagWorkers, func(ns string) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName + "-baseline"}, StringData: map[string]string{"v": "2"}}
		_, err := f.Kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	baseUpdate := time.Since(start)

	// The distribution.
	before, err := f.CoordinatorWrites(ctx)
	require.NoError(t, err)
	rd := &v1alpha1.ResourceDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + run},
		Spec: v1alpha1.ResourceDistributionSpec{
			Resource: runtime.RawExtension{Raw: secretJSON("1")},
			Targets:  v1alpha1.ResourceDistributionTargets{NamespaceLabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{label: run}}},
		},
	}
	start = time.Now()
	rd, err = f.Shoal.AppsV1alpha1().ResourceDistributions().Create(ctx, rd, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.Shoal.AppsV1alpha1().ResourceDistributions().Delete(context.WithoutCancel(ctx), rd.Name, metav1.DeleteOptions{})
	})
	waitCopies(t, f, run, n, "1")
	rdCreate := time.Since(start)
	mid, err := f.CoordinatorWrites(ctx)
	require.NoError(t, err)

	start = time.Now()
	cur, err := f.Shoal.AppsV1alpha1().ResourceDistributions().Get(ctx, rd.Name, metav1.GetOptions{})
	require.NoError(t, err)
	cur.Spec.Resource = runtime.RawExtension{Raw: secretJSON("2")}
	_, err = f.Shoal.AppsV1alpha1().ResourceDistributions().Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitCopies(t, f, run, n, "2")
	rdUpdate := time.Since(start)
	after, err := f.CoordinatorWrites(ctx)
	require.NoError(t, err)

	createWrites, updateWrites := delta(before, mid), delta(mid, after)
	fmt.Printf("%-8s %12s %12s %8s %22s\n", "step", "baseline", "distribution", "ratio", "coordinator writes/ns")
	for _, r := range []struct {
		step       string
		base, dist time.Duration
		writes     map[string]float64
	}{{"create", baseCreate, rdCreate, createWrites}, {"update", baseUpdate, rdUpdate, updateWrites}} {
		total := 0.0
		for _, v := range r.writes {
			total += v
		}
		fmt.Printf("%-8s %12s %12s %7.2fx %22.3f  %v\n", r.step, r.base.Round(time.Millisecond), r.dist.Round(time.Millisecond),
			r.dist.Seconds()/r.base.Seconds(), total/float64(n), r.writes)
		fmt.Printf("RESULT bench=distribution step=%s namespaces=%d baseline_s=%.2f distribution_s=%.2f ratio=%.2f writes_per_ns=%.3f secret_writes_per_ns=%.3f goal_writes_per_ns=%.0f\n",
			r.step, n, r.base.Seconds(), r.dist.Seconds(), r.dist.Seconds()/r.base.Seconds(), total/float64(n), r.writes["secrets"]/float64(n), goalWritesPerNamespace)
	}
}

// parallel runs fn for every item on workers goroutines and fails the
// test on the first error.
func parallel(t *testing.T, items []string, workers int, fn func(string) error) {
	t.Helper()
	work := make(chan string)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range work {
				if err := fn(it); err != nil {
					errs <- fmt.Errorf("%s: %w", it, err)
				}
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// waitCopies polls (one cluster-wide list by name) until the n namespaces
// of run hold a copy with data v=value.
func waitCopies(t *testing.T, f *framework.Framework, run string, n int, value string) {
	t.Helper()
	have := 0
	err := framework.WaitFor(t.Context(), 10*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := f.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", secretName).String()})
		if err != nil {
			return false, err
		}
		have = 0
		for _, s := range list.Items {
			if s.Annotations[wellknown.AnnotationResourceDistributionFrom] != "" && string(s.Data["v"]) == value &&
				len(s.Namespace) > len(run) && s.Namespace[:len("rdb-")+len(run)] == "rdb-"+run {
				have++
			}
		}
		return have == n, nil
	})
	require.NoError(t, err, "copies with v=%s: %d of %d", value, have, n)
}

// delta is after minus before, by resource, without zeros.
func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// deleteNamespaces deletes the benchmark's namespaces and waits (at most
// five minutes) until they are gone.
func deleteNamespaces(t *testing.T, f *framework.Framework, names []string) {
	ctx := context.WithoutCancel(t.Context())
	for _, ns := range names {
		_ = f.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	err := framework.WaitFor(ctx, 5*time.Minute, func(ctx context.Context) (bool, error) {
		for _, ns := range names {
			if _, err := f.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Logf("namespaces still terminating after 5 minutes: %v", err)
	}
}
