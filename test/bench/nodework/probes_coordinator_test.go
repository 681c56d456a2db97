//go:build bench && linux

package nodeworkbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/shoal-io/shoal/coordinator/podprobemarker"
	"github.com/shoal-io/shoal/internal/apimetrics"
	shoalclient "github.com/shoal-io/shoal/protocol/client/clientset/versioned"
	shoalscheme "github.com/shoal-io/shoal/protocol/client/clientset/versioned/scheme"
	shoalinformers "github.com/shoal-io/shoal/protocol/client/informers/externalversions"
)

// Environment of the PodProbeMarker benchmark's coordinator child.
const (
	// modeProbes (in modeEnv) makes the child run the PodProbeMarker
	// controller against the apiserver of probeKubeconfigEnv.
	modeProbes = "probes"
	// probeKubeconfigEnv names the admin kubeconfig of the benchmark's
	// apiserver.
	probeKubeconfigEnv = "SHOAL_BENCH_KUBECONFIG"
	// probeRateEnv is the Kubernetes client's rate limit the child starts
	// with, "qps/burst"; POST /probes/rate changes it.
	probeRateEnv = "SHOAL_BENCH_CHILD_CLIENT_RATE"
)

// The coordinator's Kubernetes client rate limit (coordinator.restConfig):
// every controller's pod writes share it; Events have a client of their
// own with the same limit (coordinator.Run).
const (
	coordinatorQPS   = 50
	coordinatorBurst = 100
)

// probeBench is the coordinator side of the PodProbeMarker benchmark: the
// real controller, its informers and Event recorder, built as
// coordinator.Run builds them, over a real apiserver.
type probeBench struct {
	limiter *swapLimiter
	// events is the rate limiter of the Events' client, set with limiter.
	events *swapLimiter
}

// startProbeBench builds and runs the controller until ctx ends, and
// returns once its informers have synced.
func startProbeBench(ctx context.Context, c *benchCoordinator) (*probeBench, error) {
	qps, burst, err := parseRate(os.Getenv(probeRateEnv))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", probeRateEnv, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(probeKubeconfigEnv))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", probeKubeconfigEnv, err)
	}
	// As coordinator.restConfig and coordinator.Run: QPS 50, burst 100 per
	// client, and the API request counter on the transport.
	cfg.QPS, cfg.Burst = coordinatorQPS, coordinatorBurst
	cfg.UserAgent = "shoal-coordinator"
	apiRequests, err := apimetrics.New("shoal_coordinator", c.reg)
	if err != nil {
		return nil, fmt.Errorf("register API request metrics: %w", err)
	}
	apiRequests.Instrument(cfg)
	// The one departure: the kubernetes clients' limiters (the pods'
	// patches; the Events, whose client is separate as in coordinator.Run)
	// can be changed while running, so the benchmark can make the initial
	// convergence quicker than production and measure the rest at
	// production's limit.
	b := &probeBench{limiter: newSwapLimiter(qps, burst), events: newSwapLimiter(qps, burst)}
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.RateLimiter = b.limiter
	client, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	eventCfg := rest.CopyConfig(cfg)
	eventCfg.RateLimiter = b.events
	eventClient, err := kubernetes.NewForConfig(eventCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for events: %w", err)
	}
	shoal, err := shoalclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("shoal client: %w", err)
	}
	kubeInf := kubeinformers.NewSharedInformerFactory(client, 0)
	shoalInf := shoalinformers.NewSharedInformerFactory(shoal, 0)
	scheme := runtime.NewScheme()
	if err := errors.Join(kubescheme.AddToScheme(scheme), shoalscheme.AddToScheme(scheme)); err != nil {
		return nil, fmt.Errorf("event scheme: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: eventClient.EventsV1()})
	context.AfterFunc(ctx, broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(scheme, "shoal-coordinator")
	ctrl, err := podprobemarker.New(podprobemarker.Options{
		Client: client, Shoal: shoal,
		Markers: shoalInf.Apps().V1alpha1().PodProbeMarkers().Informer(), Pods: kubeInf.Core().V1().Pods().Informer(),
		Store: c.store, IsLeader: func() bool { return true }, Recorder: recorder, Registerer: c.reg,
	})
	if err != nil {
		return nil, fmt.Errorf("podprobemarker controller: %w", err)
	}
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("start recording events: %w", err)
	}
	kubeInf.Start(ctx.Done())
	shoalInf.Start(ctx.Done())
	go func() { _ = ctrl.Run(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), ctrl.HasSynced) {
		return nil, fmt.Errorf("podprobemarker controller not synced within 5 minutes")
	}
	return b, nil
}

func (b *probeBench) routes(c *benchCoordinator, mux *http.ServeMux) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /probes/usage", b.handleUsage)
	mux.HandleFunc("POST /probes/rate", b.handleRate)
}

// handleUsage answers the process's CPU time, its peak and current RSS,
// and the client's rate limit.
func (b *probeBench) handleUsage(w http.ResponseWriter, _ *http.Request) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		reply(w, nil, fmt.Errorf("getrusage: %w", err))
		return
	}
	rss, err := readRSS()
	if err != nil {
		reply(w, nil, err)
		return
	}
	// Not ru_maxrss: it survives execve, and the child was forked from
	// the test process, whose peak it would report.
	hwm, err := readProcStatusKiB("VmHWM")
	qps, burst := b.limiter.rate()
	reply(w, probeUsageReply{CPUNanos: cpuNanos(ru), MaxRSS: hwm << 10, RSS: rss, QPS: qps, Burst: burst}, err)
}

// readProcStatusKiB reads a "<field>: <n> kB" line of /proc/self/status.
func readProcStatusKiB(field string) (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/status: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, line)
		}
		return strconv.ParseUint(f[0], 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// handleRate sets the kubernetes client's rate limit to ?rate=qps/burst.
func (b *probeBench) handleRate(w http.ResponseWriter, r *http.Request) {
	qps, burst, err := parseRate(r.URL.Query().Get("rate"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.limiter.set(qps, burst)
	b.events.set(qps, burst)
	reply(w, probeUsageReply{QPS: qps, Burst: burst}, nil)
}

// probeUsageReply answers GET /probes/usage and POST /probes/rate.
type probeUsageReply struct {
	// CPUNanos is the process's CPU time (user+system) so far.
	CPUNanos int64 `json:"cpuNanos"`
	// MaxRSS is the process's peak RSS so far (VmHWM).
	MaxRSS uint64 `json:"maxRSS"`
	// RSS is the process's RSS now.
	RSS uint64 `json:"rss"`
	// QPS and Burst are the kubernetes client's rate limit now.
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst"`
}

// parseRate reads "qps/burst" (burst defaults to twice qps, at least 1).
func parseRate(s string) (float64, int, error) {
	if s == "" {
		return coordinatorQPS, coordinatorBurst, nil
	}
	q, b, hasBurst := strings.Cut(s, "/")
	qps, err := strconv.ParseFloat(q, 64)
	if err != nil || qps <= 0 {
		return 0, 0, fmt.Errorf("rate %q: want qps[/burst] with qps > 0", s)
	}
	burst := max(1, int(2*qps))
	if hasBurst {
		if burst, err = strconv.Atoi(b); err != nil || burst < 1 {
			return 0, 0, fmt.Errorf("rate %q: want qps[/burst] with burst >= 1", s)
		}
	}
	return qps, burst, nil
}

// swapLimiter is a client-go rate limiter whose token bucket can be
// replaced while clients use it. A request waiting on the old bucket keeps
// waiting there.
type swapLimiter struct {
	cur atomic.Pointer[limiterState]
	mu  sync.Mutex
}

type limiterState struct {
	flowcontrol.RateLimiter
	qps   float64
	burst int
}

var _ flowcontrol.RateLimiter = (*swapLimiter)(nil)

func newSwapLimiter(qps float64, burst int) *swapLimiter {
	l := &swapLimiter{}
	l.set(qps, burst)
	return l
}

func (l *swapLimiter) set(qps float64, burst int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur.Swap(&limiterState{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst), qps: qps, burst: burst})
	if old != nil {
		old.Stop()
	}
}

func (l *swapLimiter) rate() (float64, int) {
	s := l.cur.Load()
	return s.qps, s.burst
}

// TryAccept implements flowcontrol.RateLimiter.
func (l *swapLimiter) TryAccept() bool { return l.cur.Load().TryAccept() }

// Accept implements flowcontrol.RateLimiter.
func (l *swapLimiter) Accept() { l.cur.Load().Accept() }

// Stop implements flowcontrol.RateLimiter.
func (l *swapLimiter) Stop() { l.cur.Load().Stop() }

// QPS implements flowcontrol.RateLimiter.
func (l *swapLimiter) QPS() float32 { return l.cur.Load().QPS() }

// Wait implements flowcontrol.RateLimiter.
func (l *swapLimiter) Wait(ctx context.Context) error { return l.cur.Load().Wait(ctx) }
