//go:build bench

// Package pub benchmarks the latency the PodUnavailableBudget webhook adds
// to pod deletes on the local cluster.
package pub

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/shoal-io/shoal/protocol/apis/policy/v1alpha1"
	"github.com/shoal-io/shoal/test/e2e/framework"
)

// goalAddedP99 is issue 23's goal: the PUB webhook adds at most 10 ms to
// a pod delete's p99.
const goalAddedP99 = 10 * time.Millisecond

// pubWebhook is the webhook entry under test, in the shoal-validating
// configuration.
const pubWebhook = "pods.podunavailablebudgets.validate.shoal.io"

var (
	flagRate    = flag.Int("rate", 50, "pod DELETE requests per second")
	flagSeconds = flag.Int("seconds", envInt("SHOAL_BENCH_PUB_SECONDS", 10), "seconds of each of the four phases (env SHOAL_BENCH_PUB_SECONDS)")
)

// envInt reads an integer from the environment, def when unset.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestPUBWebhookLatencyBenchmark sends dry-run pod DELETEs (they go
// through admission like real ones, and the webhook does all its work but
// record) at -rate per second to the pods of a Deployment a
// PodUnavailableBudget covers, in four phases in one run: with the PUB
// webhook, without it (its entry taken out of the webhook configuration,
// put back at the end), and both again. It reports the p50 and p99 of
// each side and what the webhook adds, against the goal.
//
//	make bench-pub   (the cluster must run Shoal)
func TestPUBWebhookLatencyBenchmark(t *testing.T) {
	f := framework.New(t)
	ctx := t.Context()
	ns := f.Namespace

	labels := map[string]string{"app": "pub"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pub"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "app", Image: f.Image("testserver:latest"), Args: []string{"serve", "--port", "8080"}}},
				},
			},
		},
	}
	_, err := f.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	pub := &policyv1alpha1.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pub", Namespace: ns},
		Spec: policyv1alpha1.PodUnavailableBudgetSpec{
			Selector:       d.Spec.Selector,
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}
	_, err = f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(ns).Create(ctx, pub, metav1.CreateOptions{})
	require.NoError(t, err)
	var pods []string
	err = framework.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := f.Shoal.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, "pub", metav1.GetOptions{})
		if err != nil || p.Status.CurrentAvailable != 3 || p.Status.UnavailableAllowed != 1 {
			return false, err
		}
		list, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=pub"})
		if err != nil {
			return false, err
		}
		pods = nil
		for _, p := range list.Items {
			pods = append(pods, p.Name)
		}
		return len(pods) == 3, nil
	})
	require.NoError(t, err, "3 ready pods under a budget of 1")

	hooks := f.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	orig, err := hooks.Get(ctx, "shoal-validating", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(orig.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == pubWebhook }))
	setWebhook := func(ctx context.Context, on bool) {
		t.Helper()
		cur, err := hooks.Get(ctx, orig.Name, metav1.GetOptions{})
		require.NoError(t, err)
		i := slices.IndexFunc(orig.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == pubWebhook })
		cur.Webhooks = slices.DeleteFunc(cur.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == pubWebhook })
		if on {
			cur.Webhooks = append(cur.Webhooks, orig.Webhooks[i])
		}
		_, err = hooks.Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() { setWebhook(context.WithoutCancel(ctx), true) })

	var with, without []time.Duration
	for phase := range 4 {
		on := phase%2 == 0
		setWebhook(ctx, on)
		lat := deletes(ctx, t, f, ns, pods)
		if on {
			with = append(with, lat...)
		} else {
			without = append(without, lat...)
		}
	}
	slices.Sort(with)
	slices.Sort(without)
	p := func(ds []time.Duration, q int) time.Duration { return ds[min(len(ds)-1, len(ds)*q/100)] }
	added50, added99 := p(with, 50)-p(without, 50), p(with, 99)-p(without, 99)
	fmt.Printf("%-16s %8s %10s %10s\n", "pod DELETE", "requests", "p50", "p99")
	fmt.Printf("%-16s %8d %10s %10s\n", "with PUB webhook", len(with), p(with, 50).Round(10*time.Microsecond), p(with, 99).Round(10*time.Microsecond))
	fmt.Printf("%-16s %8d %10s %10s\n", "no webhook", len(without), p(without, 50).Round(10*time.Microsecond), p(without, 99).Round(10*time.Microsecond))
	fmt.Printf("added by the webhook: p50 %s, p99 %s (goal p99 <= %s)\n", added50.Round(10*time.Microsecond), added99.Round(10*time.Microsecond), goalAddedP99)
	fmt.Printf("RESULT bench=pub rate=%d requests=%d with_p50_ms=%.2f with_p99_ms=%.2f without_p50_ms=%.2f without_p99_ms=%.2f added_p50_ms=%.2f added_p99_ms=%.2f goal_added_p99_ms=%.0f\n",
		*flagRate, len(with)+len(without), ms(p(with, 50)), ms(p(with, 99)), ms(p(without, 50)), ms(p(without, 99)), ms(added50), ms(added99), ms(goalAddedP99))
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// deletes sends dry-run DELETEs of pods, round robin, at -rate per second
// for -seconds, each in its own goroutine so that a slow one does not
// slow the rate, and returns their latencies.
func deletes(ctx context.Context, t *testing.T, f *framework.Framework, ns string, pods []string) []time.Duration {
	t.Helper()
	tick := time.NewTicker(time.Second / time.Duration(*flagRate))
	defer tick.Stop()
	n := *flagRate * *flagSeconds
	out := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		<-tick.C
		wg.Go(func() {
			start := time.Now()
			errs[i] = f.Kube.CoreV1().Pods(ns).Delete(ctx, pods[i%len(pods)], metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			out[i] = time.Since(start)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "a dry-run delete within the budget is allowed")
	}
	return out
}
