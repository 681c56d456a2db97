// Command shoal-coordinator is Shoal's thin central part (a Deployment with
// leader election): it turns API objects into per-node work for the agents,
// serves the admission webhooks, and writes status. Flags and names:
// docs/dev/backbone.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	// The coordinator's image has no zoneinfo: AdvancedCronJob time zones
	// come from the binary (about 450 KB).
	_ "time/tzdata"

	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator"
	"github.com/shoal-io/shoal/coordinator/features"
)

// version is set at build time (-X main.version=...).
var version = "dev"

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shoal-coordinator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("shoal-coordinator", flag.ContinueOnError)
	klog.InitFlags(fs)
	var o coordinator.Options
	fs.StringVar(&o.Namespace, "namespace", envOr("POD_NAMESPACE", "shoal-system"), "namespace of the coordinator and its Secrets (env POD_NAMESPACE)")
	fs.StringVar(&o.PodName, "pod-name", os.Getenv("POD_NAME"), "this replica's pod name (env POD_NAME)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig path (empty: in-cluster)")
	fs.StringVar(&o.GRPCAddr, "grpc-addr", ":9443", "node-work gRPC listen address")
	fs.StringVar(&o.WebhookAddr, "webhook-addr", ":9444", "admission webhook listen address")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address of /metrics, /healthz and /readyz")
	fs.StringVar(&o.AgentAudience, "agent-audience", "shoal-coordinator", "audience of the agents' projected tokens")
	fs.StringVar(&o.AgentServiceAccount, "agent-service-account", "shoal-system:shoal-agent", "namespace:name of the agents' ServiceAccount")
	fs.BoolVar(&o.EnableTestWork, "enable-test-work", false, "turn labelled ConfigMaps into test-only noop work (e2e tests)")
	fs.BoolVar(&o.KruisePodReadinessGate, "kruise-pod-readiness-gate", envOr("SHOAL_KRUISE_POD_READINESS_GATE", "") == "true",
		"add the KruisePodReady readiness gate to every pod created (OpenKruise's KruisePodReadinessGate; env SHOAL_KRUISE_POD_READINESS_GATE=true; "+
			"needs the shoal-pods webhook of deploy/components/kruise-pod-readiness-gate)")
	gates := features.New()
	fs.Func("feature-gates", "comma-separated Name=true|false pairs of OpenKruise feature gates: "+strings.Join(gates.KnownFeatures(), "; "), gates.Set)
	o.Features = gates
	fs.BoolVar(&o.Profiling, "profiling", false, "serve Go runtime profiles under /debug/pprof/ on --metrics-addr (unauthenticated)")
	fs.DurationVar(&o.LeaseDuration, "leader-lease-duration", 15*time.Second, "leader lease duration")
	fs.DurationVar(&o.RenewDeadline, "leader-renew-deadline", 10*time.Second, "leader renew deadline")
	fs.DurationVar(&o.RetryPeriod, "leader-retry-period", 2*time.Second, "leader election retry period")
	fs.Func("kube-api-qps", "requests per second to the apiserver, sustained (default 50; events have their own budget of the same size)", func(v string) error {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil || f <= 0 {
			return fmt.Errorf("want a positive number, got %q", v)
		}
		o.KubeAPIQPS = float32(f)
		return nil
	})
	fs.DurationVar(&o.PeerCertValidity, "peer-cert-validity", 12*time.Hour,
		"lifetime of the agents' peer TLS certificates (at least 10m); agents renew them after two thirds of it")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 100, "requests to the apiserver allowed in a burst above --kube-api-qps")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.PeerCertValidity < 10*time.Minute {
		return fmt.Errorf("--peer-cert-validity %s is too short: give at least 10m", o.PeerCertValidity)
	}
	if o.PodName == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--pod-name is required: %w", err)
		}
		o.PodName = host
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := klog.Background().WithValues("pod", o.PodName)
	log.Info("Starting shoal-coordinator", "version", version, "namespace", o.Namespace)
	return coordinator.Run(klog.NewContext(ctx, log), o)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
