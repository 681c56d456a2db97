//go:build bench && linux

package nodeworkbench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/shoal-io/shoal/agent/work"
	"github.com/shoal-io/shoal/protocol/apis/apps/v1alpha1"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
	"github.com/shoal-io/shoal/test/cluster"
	"github.com/shoal-io/shoal/test/cluster/pki"
)

var (
	flagPodsPerAgent  = flag.Int("pods-per-agent", envInt("SHOAL_BENCH_PODS_PER_AGENT", 10), "probes benchmark: pods per node (env SHOAL_BENCH_PODS_PER_AGENT)")
	flagSteadySeconds = flag.Float64("steady-seconds", envFloat("SHOAL_BENCH_STEADY_SECONDS", 60), "probes benchmark: the steady-state window (env SHOAL_BENCH_STEADY_SECONDS)")
	flagFlipPercent   = flag.Int("flip-percent", envInt("SHOAL_BENCH_FLIP_PERCENT", 10), "probes benchmark: percent of the pods whose probe fails at once (env SHOAL_BENCH_FLIP_PERCENT)")
	flagClientRate    = flag.String("client-rate", envString("SHOAL_BENCH_CLIENT_RATE", fmt.Sprintf("%d/%d", coordinatorQPS, coordinatorBurst)),
		"probes benchmark: the coordinator's Kubernetes client qps/burst for the steady state and the flip (production's is 50/100; env SHOAL_BENCH_CLIENT_RATE)")
	flagConvergeRate = flag.String("converge-rate", envString("SHOAL_BENCH_CONVERGE_RATE", "500/1000"),
		"probes benchmark: the coordinator's Kubernetes client qps/burst for the initial convergence (env SHOAL_BENCH_CONVERGE_RATE)")
)

// The PodProbeMarker benchmark's objects.
const (
	probeMarkerName = "bench-probe"
	probeName       = "healthy"
	// probeNodeName is the probe's name on the nodes (<marker>#<probe>).
	probeNodeName      = probeMarkerName + "#" + probeName
	probeConditionType = "bench.shoal.io/healthy"
	probeLabel         = "bench.shoal.io/probe"
	probeLabelOK       = "succeeded"
	probeLabelFailed   = "failed"
	probeAppLabel      = "app"
	probeAppValue      = "probe-bench"
	probeFailMessage   = "bench: the probe failed"
	probeCRDFile       = "deploy/crds/apps.kruise.io_podprobemarkers.yaml"
)

// Bounds of the PodProbeMarker benchmark's waits.
const (
	apiserverStart = 3 * time.Minute
	crdTimeout     = time.Minute
)

// TestProbesBenchmark runs the real PodProbeMarker controller in the
// coordinator child against a real apiserver (etcd and kube-apiserver
// started here), with pods-per-agent pods bound to each of N nodes and one
// PodProbeMarker selecting them all. The simulated agents answer each
// pod's probe item with Succeeded; the benchmark measures the initial
// convergence, the pod writes in the steady state, the time from a probe
// turning Failed on flip-percent of the pods at once to each pod's
// condition showing False, and the coordinator's CPU and peak RSS. It
// fails only when something breaks.
func TestProbesBenchmark(t *testing.T) {
	n, perNode := *flagAgents, *flagPodsPerAgent
	require.Positive(t, n, "-agents")
	require.Positive(t, perNode, "-pods-per-agent")
	require.True(t, *flagFlipPercent > 0 && *flagFlipPercent <= 100, "-flip-percent: want 1..100")
	measureQPS, measureBurst, err := parseRate(*flagClientRate)
	require.NoError(t, err, "-client-rate")
	convergeQPS, convergeBurst, err := parseRate(*flagConvergeRate)
	require.NoError(t, err, "-converge-rate")
	steady := time.Duration(*flagSteadySeconds * float64(time.Second))
	pods := n * perNode
	runStart := time.Now()

	// 1. The apiserver and the objects, before the coordinator starts.
	dir := t.TempDir()
	startCtx, cancelStart := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancelStart()
	api := startAPIServer(startCtx, t, dir)
	apiUp := time.Since(runStart)
	setupStart := time.Now()
	require.NoError(t, installCRD(startCtx, api.cfg), "install the PodProbeMarker CRD")
	require.NoError(t, createProbeObjects(startCtx, api.client, n, perNode), "create the nodes and pods")
	setup := time.Since(setupStart)

	// 2. The coordinator child and the agents.
	env := newBenchEnv(t, n, modeEnv+"="+modeProbes, probeKubeconfigEnv+"="+api.kubeconfig,
		probeRateEnv+"="+rateString(convergeQPS, convergeBurst))
	ctx, coord := env.ctx, env.coord
	watch := newPodWatch(n, perNode, *flagFlipPercent)
	stopWatch, err := watch.run(ctx, api.client)
	require.NoError(t, err, "watch the pods")
	t.Cleanup(stopWatch)
	sim := &probeSim{flip: make(chan struct{}), flipped: watch.flipped, first: map[string]int64{}, sent: map[string]int64{}}
	f := env.fleet(t, n, func(string) map[string]work.Handler {
		return map[string]work.Handler{nodework.KindProbe: sim.handler()}
	})
	storm, _ := env.connectAll(t, f, n)

	// 3. Initial convergence: the marker's probe on every pod, all Succeeded.
	u0, m0 := probeSample(ctx, t, coord, "before the marker")
	shoal, err := shoalclient.NewForConfig(api.cfg)
	require.NoError(t, err)
	created := time.Now()
	_, err = shoal.AppsV1alpha1().PodProbeMarkers(benchNamespace).Create(ctx, probeMarker(), metav1.CreateOptions{})
	require.NoError(t, err, "create the PodProbeMarker")
	convergeBound := 5*time.Minute + time.Duration(3*3*float64(pods)/convergeQPS*float64(time.Second))
	if !watch.waitFor(ctx, convergeBound, func() bool { return watch.succeeded == pods }) {
		t.Fatalf("within %s of creating the PodProbeMarker, %d of %d pods showed Succeeded (%d probe items started on the agents)",
			convergeBound, watch.count(), pods, sim.starts())
	}
	converged := time.Duration(watch.allAt.Load() - created.UnixNano())
	itemsAll := time.Duration(sim.lastFirst() - created.UnixNano())
	u1, m1 := probeSample(ctx, t, coord, "after the initial convergence")

	// 4. Steady state, at the measured rate.
	var rate probeUsageReply
	require.NoError(t, coord.post(ctx, "/probes/rate", url.Values{"rate": {rateString(measureQPS, measureBurst)}}, &rate), "set the client rate")
	select {
	case <-ctx.Done():
		t.Fatalf("steady state: %v", ctx.Err())
	case <-time.After(steady):
	}
	u2, m2 := probeSample(ctx, t, coord, "after the steady state")

	// 5. Flip: flip-percent of the probes turn Failed at once.
	flipped := len(watch.flipped)
	watch.arm()
	flipAt := time.Now()
	close(sim.flip)
	flipBound := 2*time.Minute + time.Duration(3*3*float64(flipped)/measureQPS*float64(time.Second))
	if !watch.waitFor(ctx, flipBound, func() bool { return len(watch.condFalse) == flipped && len(watch.labelFailed) == flipped }) {
		t.Fatalf("within %s of the flip, %d of %d flipped pods showed the condition False (%d the label)",
			flipBound, len(watch.condFalse), flipped, len(watch.labelFailed))
	}
	flipDone := time.Since(flipAt)
	// Let writes the flip still queued land before the last sample.
	time.Sleep(2 * time.Second)
	u3, m3 := probeSample(ctx, t, coord, "after the flip")

	cond, label := sim.latencies(watch)
	reportProbes(os.Stdout, probesReport{
		agents: n, perNode: perNode, pods: pods, flipped: flipped, storm: storm,
		apiUp: apiUp, setup: setup, steady: steady,
		convergeQPS: convergeQPS, convergeBurst: convergeBurst, measureQPS: measureQPS, measureBurst: measureBurst,
		converged: converged, itemsAll: itemsAll, flipDone: flipDone,
		usage: [4]probeUsageReply{u0, u1, u2, u3}, metrics: [4]probeMetrics{m0, m1, m2, m3},
		cond: cond, label: label, resent: sim.resent.Load(), runs: sim.runs.Load(), total: time.Since(runStart),
	})
}

// rateString is "qps/burst".
func rateString(qps float64, burst int) string {
	return strconv.FormatFloat(qps, 'f', -1, 64) + "/" + strconv.Itoa(burst)
}

// probeMarker selects every benchmark pod with one exec probe that sets a
// condition and a label.
func probeMarker() *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: probeMarkerName},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{probeAppLabel: probeAppValue}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: probeName, ContainerName: "main",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "test -f /tmp/healthy"}}},
					PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
				}},
				PodConditionType: probeConditionType,
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
					{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{probeLabel: probeLabelOK}},
					{State: v1alpha1.ProbeFailed, Labels: map[string]string{probeLabel: probeLabelFailed}},
				},
			}},
		},
	}
}

// probePodName names pod j of node i.
func probePodName(i, j int) string { return fmt.Sprintf("probe-%d-%d", i, j) }

// flips reports whether pod j of node i is among the flipped ones: every
// (100/percent)th pod, staggered so every node has its share.
func flips(i, j, percent int) bool {
	k := max(1, int(math.Round(100/float64(percent))))
	return (i+j)%k == 0
}

// probeSim is the agents' probe handler: it reports each pod's probe
// Succeeded once, and Failed for the flipped pods when flip closes; it
// records when each report was sent.
type probeSim struct {
	flip    chan struct{}
	flipped map[string]bool // pod name -> flips; read-only

	runs   atomic.Int64 // handler runs
	resent atomic.Int64 // runs of an item that had already reported (restarts, new generations)

	mu    sync.Mutex
	first map[string]int64 // pod -> when its first report was sent
	sent  map[string]int64 // flipped pod -> when its Failed report was sent
}

func (s *probeSim) handler() work.Handler {
	return work.HandlerFunc(func(ctx context.Context, t *work.Task) error {
		spec := t.Item.GetProbe()
		if spec == nil {
			return errors.New("probe work item has no probe spec")
		}
		s.runs.Add(1)
		pod := spec.GetPodName()
		start := time.Now()
		report := func(state nodeworkv1.ProbeState, message string, transition time.Time) error {
			now := time.Now()
			status := &nodeworkv1.ProbeStatus{PodUid: spec.GetPodUid()}
			for _, p := range spec.GetProbes() {
				status.Probes = append(status.Probes, &nodeworkv1.ProbeResult{Name: p.GetName(), State: state, Message: message,
					LastProbeUnixNanos: now.UnixNano(), LastTransitionUnixNanos: transition.UnixNano()})
			}
			return t.Update(nil, nodeworkv1.Phase_PHASE_RUNNING, "1 of 1 probes have a result", func(r *nodeworkv1.WorkReport) {
				r.Status = &nodeworkv1.WorkReport_Probe{Probe: status}
			})
		}
		flipped := false
		select {
		case <-s.flip:
			flipped = s.flipped[pod]
		default:
		}
		s.mu.Lock()
		if _, ok := s.first[pod]; ok {
			s.resent.Add(1)
		} else {
			s.first[pod] = start.UnixNano()
		}
		s.mu.Unlock()
		state, message := nodeworkv1.ProbeState_PROBE_STATE_SUCCEEDED, ""
		if flipped {
			state, message = nodeworkv1.ProbeState_PROBE_STATE_FAILED, probeFailMessage
		}
		if err := report(state, message, start); err != nil {
			return err
		}
		if !s.flipped[pod] || flipped {
			<-ctx.Done()
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.flip:
		}
		now := time.Now()
		s.mu.Lock()
		if _, ok := s.sent[pod]; !ok {
			s.sent[pod] = now.UnixNano()
		}
		s.mu.Unlock()
		if err := report(nodeworkv1.ProbeState_PROBE_STATE_FAILED, probeFailMessage, now); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
}

func (s *probeSim) starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.first)
}

// lastFirst is when the last pod's first report was sent.
func (s *probeSim) lastFirst() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maxOf(s.first)
}

// latencies returns, per flipped pod, the time from its Failed report
// being sent to the apiserver showing its condition False, and its label.
func (s *probeSim) latencies(w *podWatch) (cond, label []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for pod, sent := range s.sent {
		if at, ok := w.condFalse[pod]; ok {
			cond = append(cond, at-sent)
		}
		if at, ok := w.labelFailed[pod]; ok {
			label = append(label, at-sent)
		}
	}
	return cond, label
}

// podWatch follows the benchmark's pods through a watch (an informer
// keeping only labels and conditions) and records when they show what.
type podWatch struct {
	pods    int
	flipped map[string]bool // read-only
	allAt   atomic.Int64    // when the last pod showed Succeeded

	mu          sync.Mutex
	ok          map[string]bool // pods showing the condition True and the label succeeded
	succeeded   int
	armed       bool
	condFalse   map[string]int64 // flipped pod -> when it first showed the condition False
	labelFailed map[string]int64 // flipped pod -> when it first showed the label failed
}

func newPodWatch(n, perNode, percent int) *podWatch {
	w := &podWatch{pods: n * perNode, flipped: map[string]bool{}, ok: map[string]bool{},
		condFalse: map[string]int64{}, labelFailed: map[string]int64{}}
	for i := range n {
		for j := range perNode {
			if flips(i, j, percent) {
				w.flipped[probePodName(i, j)] = true
			}
		}
	}
	return w
}

// run starts the informer and waits for its first list.
func (w *podWatch) run(ctx context.Context, client kubernetes.Interface) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(client, 0, kubeinformers.WithNamespace(benchNamespace),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = probeAppLabel + "=" + probeAppValue }))
	inf := factory.Core().V1().Pods().Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.ResourceVersion, Labels: p.Labels},
				Status:     corev1.PodStatus{Conditions: p.Status.Conditions},
			}, nil
		}
		return obj, nil
	}); err != nil {
		cancel()
		return nil, err
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.saw,
		UpdateFunc: func(_, obj any) { w.saw(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, errors.New("the pod watch never synced")
	}
	return func() { cancel(); factory.Shutdown() }, nil
}

func (w *podWatch) saw(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now().UnixNano()
	var cond corev1.ConditionStatus
	for _, c := range pod.Status.Conditions {
		if c.Type == probeConditionType {
			cond = c.Status
		}
	}
	label := pod.Labels[probeLabel]
	w.mu.Lock()
	defer w.mu.Unlock()
	good := cond == corev1.ConditionTrue && label == probeLabelOK
	if good != w.ok[pod.Name] {
		w.ok[pod.Name] = good
		if good {
			w.succeeded++
			if w.succeeded == w.pods {
				w.allAt.Store(now)
			}
		} else {
			w.succeeded--
		}
	}
	if !w.armed || !w.flipped[pod.Name] {
		return
	}
	if _, seen := w.condFalse[pod.Name]; !seen && cond == corev1.ConditionFalse {
		w.condFalse[pod.Name] = now
	}
	if _, seen := w.labelFailed[pod.Name]; !seen && label == probeLabelFailed {
		w.labelFailed[pod.Name] = now
	}
}

// arm starts recording the flipped pods' changes.
func (w *podWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = true
}

func (w *podWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.succeeded
}

// waitFor polls done (under the lock) every 20 ms until it holds, timeout
// passes or ctx ends.
func (w *podWatch) waitFor(ctx context.Context, timeout time.Duration, done func() bool) bool {
	check := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return done()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !check() {
		select {
		case <-ctx.Done():
			return check()
		case <-tick.C:
		}
	}
	return true
}

// probeMetrics is what the coordinator's /metrics says at one moment.
type probeMetrics struct {
	// podWrites is shoal_coordinator_podprobe_pod_writes_total by result
	// ("ok", "error").
	podWrites map[string]float64
	// changes is shoal_coordinator_podprobe_state_changes_total (all
	// states).
	changes float64
	// apiWrites is shoal_coordinator_api_requests_total of the writing
	// verbs, by resource.
	apiWrites map[string]float64
}

func (m probeMetrics) writes() float64 {
	var out float64
	for _, v := range m.podWrites {
		out += v
	}
	return out
}

// probeSample reads the coordinator's usage and metrics.
func probeSample(ctx context.Context, t *testing.T, coord *coordProc, when string) (probeUsageReply, probeMetrics) {
	t.Helper()
	var u probeUsageReply
	require.NoError(t, coord.get(ctx, "/probes/usage", nil, &u), "coordinator usage %s", when)
	raw, err := coord.raw(ctx, "/metrics")
	require.NoError(t, err, "coordinator metrics %s", when)
	m, err := parseProbeMetrics(raw)
	require.NoError(t, err, "parse the coordinator's metrics %s", when)
	return u, m
}

func parseProbeMetrics(raw []byte) (probeMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return probeMetrics{}, err
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	out := probeMetrics{podWrites: map[string]float64{}, apiWrites: map[string]float64{}}
	for _, m := range fams["shoal_coordinator_podprobe_pod_writes_total"].GetMetric() {
		out.podWrites[label(m, "result")] += m.GetCounter().GetValue()
	}
	for _, m := range fams["shoal_coordinator_podprobe_state_changes_total"].GetMetric() {
		out.changes += m.GetCounter().GetValue()
	}
	for _, m := range fams["shoal_coordinator_api_requests_total"].GetMetric() {
		if v := label(m, "verb"); v != http.MethodGet && v != http.MethodHead {
			out.apiWrites[label(m, "resource")] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// benchAPIServer is the benchmark's etcd and kube-apiserver.
type benchAPIServer struct {
	kubeconfig string
	cfg        *rest.Config
	client     kubernetes.Interface
}

// startAPIServer runs etcd and kube-apiserver (the local cluster's
// binaries, built into the machine cache if missing) on free loopback
// ports until the test ends, and returns an admin client without a rate
// limit. etcd's data goes under SHOAL_BENCH_STATE_DIR when set (tmpfs in
// hack/bench-nodework.sh).
func startAPIServer(ctx context.Context, t *testing.T, dir string) *benchAPIServer {
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, err := cluster.FindRoot(wd)
	require.NoError(t, err)
	cfg, err := cluster.LoadConfig(root, 1)
	require.NoError(t, err)
	require.NoError(t, cluster.EnsureBinaries(ctx, cfg, os.Stderr), "etcd and kube-apiserver binaries")

	ports, err := freePorts(3)
	require.NoError(t, err)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	apiURL := fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	b, err := pki.Generate(filepath.Join(dir, "apiserver-pki"), pki.Options{ServiceIP: cluster.ServiceIP, APIServerURL: apiURL, ClusterName: "shoal-bench"})
	require.NoError(t, err, "apiserver PKI")
	dataBase := dir
	if *flagState != "" {
		dataBase, err = os.MkdirTemp(*flagState, "shoal-bench-etcd-")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dataBase) })
	}

	etcd := startProc(t, filepath.Join(dir, "etcd.log"), cfg.EtcdBinary(),
		"--name=bench", "--data-dir="+filepath.Join(dataBase, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=bench="+peerURL, "--unsafe-no-fsync", "--quota-backend-bytes=8589934592")
	require.NoError(t, etcd.waitHealthy(ctx, apiserverStart, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health: %s", resp.Status)
		}
		return nil
	}), "etcd healthy")

	apiserver := startProc(t, filepath.Join(dir, "kube-apiserver.log"), filepath.Join(cfg.BinDir(), "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--service-cluster-ip-range="+cluster.ServiceCIDR,
		"--client-ca-file="+b.CACert, "--tls-cert-file="+b.APIServerCert, "--tls-private-key-file="+b.APIServerKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+b.ServiceAccountPub, "--service-account-signing-key-file="+b.ServiceAccountKey,
		"--authorization-mode=RBAC",
		// No controller-manager creates the default ServiceAccount.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false")
	kubeconfig := b.Kubeconfig(pki.Admin)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	rc.QPS = -1 // the benchmark's own client is not the one measured
	client, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	require.NoError(t, apiserver.waitHealthy(ctx, apiserverStart, func(ctx context.Context) error {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}), "kube-apiserver ready")
	return &benchAPIServer{kubeconfig: kubeconfig, cfg: rc, client: client}
}

// freePorts returns n free loopback ports.
func freePorts(n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer func() { _ = l.Close() }()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// proc is a process the benchmark started.
type proc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
}

// startProc starts args with its output in logPath; the test's cleanup
// stops it (SIGTERM, then SIGKILL after 15 s), and it gets SIGKILL if this
// process dies first.
func startProc(t *testing.T, logPath string, args ...string) *proc {
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start(), "start %s", args[0])
	_ = logFile.Close()
	p := &proc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
			return
		case <-time.After(15 * time.Second):
		}
		_ = cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit within 10s of SIGKILL", filepath.Base(args[0]), cmd.Process.Pid)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s, last lines:\n%s", logPath, tail(logPath, 20))
		}
	})
	return p
}

// waitHealthy polls check every 200 ms until it succeeds, the process
// exits or timeout passes.
func (p *proc) waitHealthy(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v); log:\n%s", p.cmd.Path, p.err, tail(p.logPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy within %s: %v; log:\n%s", p.cmd.Path, timeout, last, tail(p.logPath, 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// installCRD creates the PodProbeMarker CRD and waits until it is served.
func installCRD(ctx context.Context, cfg *rest.Config) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := cluster.FindRoot(wd)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, probeCRDFile))
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return fmt.Errorf("decode %s: %w", probeCRDFile, err)
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	shoal, err := shoalclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Served once a list in the benchmark's namespace answers.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := shoal.AppsV1alpha1().PodProbeMarkers(benchNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// createProbeObjects creates the namespace, n Nodes and perNode pods
// bound to each, with the status a kubelet would have written for a
// running, initialized pod with an IP (no kubelet runs them).
func createProbeObjects(ctx context.Context, client kubernetes.Interface, n, perNode int) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", benchNamespace, err)
	}
	type job struct{ i, j int } // j < 0: node i itself
	jobs := make(chan job)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for jb := range jobs {
				var err error
				if jb.j < 0 {
					err = createNode(ctx, client, jb.i)
				} else {
					err = createPod(ctx, client, jb.i, jb.j, perNode)
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
					cancel()
				}
			}
		})
	}
send:
	for i := range n {
		for j := -1; j < perNode; j++ {
			select {
			case jobs <- job{i, j}:
			case <-ctx.Done():
				break send
			}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

func createNode(ctx context.Context, client kubernetes.Interface, i int) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"kubernetes.io/os": "linux"}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	return nil
}

func createPod(ctx context.Context, client kubernetes.Interface, i, j, perNode int) error {
	g := i*perNode + j
	pods := client.CoreV1().Pods(benchNamespace)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: probePodName(i, j), Labels: map[string]string{probeAppLabel: probeAppValue}},
		Spec: corev1.PodSpec{
			NodeName:   fmt.Sprintf("node-%d", i),
			Containers: []corev1.Container{{Name: "main", Image: "registry.bench.local/app:1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s: %w", probePodName(i, j), err)
	}
	now := metav1.Now()
	ip := fmt.Sprintf("10.%d.%d.%d", 128+g>>16, (g>>8)&0xff, g&0xff)
	hostIP := fmt.Sprintf("172.16.%d.%d", i>>8, i&0xff)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, StartTime: &now,
		HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}}, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", Image: "registry.bench.local/app:1", ImageID: "sha256:bench", Ready: true, Started: ptr.To(true),
			ContainerID: fmt.Sprintf("containerd://%064x", g),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set the status of pod %s: %w", pod.Name, err)
	}
	return nil
}

// probesReport is the PodProbeMarker benchmark's figures.
type probesReport struct {
	agents, perNode, pods, flipped int
	storm, apiUp, setup, steady    time.Duration
	convergeQPS, measureQPS        float64
	convergeBurst, measureBurst    int
	converged, itemsAll, flipDone  time.Duration
	// usage and metrics before the marker, after the convergence, after
	// the steady state and after the flip.
	usage       [4]probeUsageReply
	metrics     [4]probeMetrics
	cond, label []int64
	resent      int64
	runs        int64
	total       time.Duration
}

// floor is how long a token bucket of qps and burst, full at first, takes
// to let n requests through.
func floor(n int, qps float64, burst int) time.Duration {
	return time.Duration(float64(max(0, n-burst)) / qps * float64(time.Second))
}

// pct is the nearest-rank percentile p of ns.
func pct(ns []int64, p float64) time.Duration {
	if len(ns) == 0 {
		return 0
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return time.Duration(s[max(0, min(i, len(s)-1))])
}

func diffWrites(a, b map[string]float64) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if d := b[k] - a[k]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// reportProbes prints the table and the RESULT line.
func reportProbes(w io.Writer, r probesReport) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	m, u := r.metrics, r.usage
	cpu := func(a, b probeUsageReply) float64 { return time.Duration(b.CPUNanos - a.CPUNanos).Seconds() }
	steadyWrites := m[2].writes() - m[1].writes()
	steadyPerMin := steadyWrites / r.steady.Minutes()
	rateNote := ""
	if r.convergeQPS != coordinatorQPS || r.convergeBurst != coordinatorBurst {
		rateNote = fmt.Sprintf(" (RAISED for the bench from production's %d/%d, to keep the run short)", coordinatorQPS, coordinatorBurst)
	}
	measureNote := " (production's)"
	if r.measureQPS != coordinatorQPS || r.measureBurst != coordinatorBurst {
		measureNote = fmt.Sprintf(" (NOT production's %d/%d)", coordinatorQPS, coordinatorBurst)
	}
	p("")
	p("PodProbeMarker benchmark: %d pods (%d per node) on %d simulated agents (real gRPC + TLS over loopback); the coordinator", r.pods, r.perNode, r.agents)
	p("child runs the real PodProbeMarker controller, informers and Event recorder against a real etcd + kube-apiserver;")
	p("the agents report each pod's probe Succeeded once (no refresh), then %d pods' probes turn Failed at one instant.", r.flipped)
	p("apiserver up in %.1f s; %d nodes and %d pods (with status) created in %.1f s; agents connected in %.2f s.",
		r.apiUp.Seconds(), r.agents, r.pods, r.setup.Seconds(), r.storm.Seconds())
	p("coordinator Kubernetes client rate (the pods' patches; Events have a client of their own at the same rate): %s during the initial convergence%s,",
		rateString(r.convergeQPS, r.convergeBurst), rateNote)
	p("  %s for the steady state and the flip%s.", rateString(r.measureQPS, r.measureBurst), measureNote)
	p("")
	convWrites := m[1].writes() - m[0].writes()
	p("1. initial convergence: PodProbeMarker created -> every pod shows the condition True and the label")
	p("   %-44s %10.2f s", "last pod's probe item reported on its agent", r.itemsAll.Seconds())
	p("   %-44s %10.2f s", "every pod shows Succeeded", r.converged.Seconds())
	p("   %-44s %10.0f   (least: %d, one patch per pod)", "pod writes", convWrites, r.pods)
	p("   %-44s %s", "API writes by resource", diffWrites(m[0].apiWrites, m[1].apiWrites))
	p("   %-44s %10.2f s   at %s; at production's %d/%d: %.2f s (one patch per pod)",
		"client rate limiter's floor", floor(r.pods, r.convergeQPS, r.convergeBurst).Seconds(), rateString(r.convergeQPS, r.convergeBurst),
		coordinatorQPS, coordinatorBurst, floor(r.pods, coordinatorQPS, coordinatorBurst).Seconds())
	p("   %-44s %10.2f s", "coordinator CPU", cpu(u[0], u[1]))
	p("")
	p("2. steady state: %.0f s after every pod showed Succeeded (the agents do not re-report)", r.steady.Seconds())
	p("   %-44s %10.0f   (%.1f per minute; goal 0 apart from the 10-minute refresh)", "pod writes", steadyWrites, steadyPerMin)
	p("   %-44s %s", "API writes by resource", diffWrites(m[1].apiWrites, m[2].apiWrites))
	p("   %-44s %10.2f s", "coordinator CPU", cpu(u[1], u[2]))
	p("")
	p("3. flip: %d pods' probes (%d%%, spread over the agents) report Failed at one instant; per pod, the Failed report", r.flipped, *flagFlipPercent)
	p("   sent by its agent -> the pod's condition False (label: the marker label failed) seen through a watch")
	p("   %-10s %9s %9s %9s %9s %9s %8s", "", "p50 ms", "p90 ms", "p99 ms", "max ms", "goal p99", "")
	p("   %-10s %9.0f %9.0f %9.0f %9.0f %9s %8s", "condition", ms(pct(r.cond, .5)), ms(pct(r.cond, .9)), ms(pct(r.cond, .99)), ms(pct(r.cond, 1)),
		"<= 5 s", met(pct(r.cond, .99) <= 5*time.Second))
	p("   %-10s %9.0f %9.0f %9.0f %9.0f", "label", ms(pct(r.label, .5)), ms(pct(r.label, .9)), ms(pct(r.label, .99)), ms(pct(r.label, 1)))
	flipWrites := m[3].writes() - m[2].writes()
	p("   %-44s %10.2f s", "every flipped pod shows False", r.flipDone.Seconds())
	p("   %-44s %10.0f   (least: %d)", "pod writes", flipWrites, r.flipped)
	p("   %-44s %s", "API writes by resource", diffWrites(m[2].apiWrites, m[3].apiWrites))
	p("   %-44s %10.2f s   at %s: one patch per flipped pod (its Event goes through the events client)",
		"client rate limiter's floor for the last pod", floor(r.flipped, r.measureQPS, r.measureBurst).Seconds(), rateString(r.measureQPS, r.measureBurst))
	p("   %-44s %10.2f s", "coordinator CPU", cpu(u[2], u[3]))
	p("")
	p("4. coordinator process: %.2f s CPU in all (%.2f s before the marker: start-up and informer sync), peak RSS %.1f MiB, RSS now %.1f MiB",
		time.Duration(u[3].CPUNanos).Seconds(), time.Duration(u[0].CPUNanos).Seconds(), mib(u[3].MaxRSS), mib(u[3].RSS))
	p("   pod writes that failed: %s; probe item runs on the agents: %d (%d re-runs)", failedWrites(m[3]), r.runs, r.resent)
	p("   whole run: %.0f s", r.total.Seconds())
	p("RESULT bench=probes pods=%d agents=%d steady_writes_per_min=%.1f flip_p50_ms=%.0f flip_p99_ms=%.0f coordinator_cpu_s=%.2f coordinator_rss_mib=%.1f flip_p90_ms=%.0f flip_max_ms=%.0f flipped=%d initial_convergence_s=%.2f converge_pod_writes=%.0f flip_pod_writes=%.0f converge_rate=%s client_rate=%s",
		r.pods, r.agents, steadyPerMin, ms(pct(r.cond, .5)), ms(pct(r.cond, .99)), time.Duration(u[3].CPUNanos).Seconds(), mib(u[3].MaxRSS),
		ms(pct(r.cond, .9)), ms(pct(r.cond, 1)), r.flipped, r.converged.Seconds(), convWrites, flipWrites,
		rateString(r.convergeQPS, r.convergeBurst), rateString(r.measureQPS, r.measureBurst))
}

func failedWrites(m probeMetrics) string {
	var n float64
	for k, v := range m.podWrites {
		if strings.HasSuffix(k, "/error") {
			n += v
		}
	}
	return strconv.FormatFloat(n, 'f', 0, 64)
}
