// Command shoal-agent runs on every node (a DaemonSet with hostNetwork): it
// talks to the container runtime over CRI, runs the node's work from the
// coordinator, keeps it across restarts, and joins the agents' mesh.
// Flags and files: docs/dev/backbone.md.
//
// The agent runs without a CPU limit, so the runtime's periodic re-reading
// of the cgroup CPU limit (Go 1.25's updatemaxprocs) only costs an idle
// agent a wake-up every second; it is turned off.
//
//go:debug updatemaxprocs=0
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/agent"
	"github.com/shoal-io/shoal/agent/work"
)

// version is set at build time (-X main.version=...).
var version = "dev"

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shoal-agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("shoal-agent", flag.ContinueOnError)
	klog.InitFlags(fs)
	o := agent.Options{Version: version}
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the node this agent runs on (env NODE_NAME)")
	fs.StringVar(&o.Coordinator, "coordinator", defaultCoordinator(), "the coordinator's host:port (default from the shoal-coordinator Service's env vars)")
	fs.StringVar(&o.CoordinatorServerName, "coordinator-server-name", "shoal-coordinator.shoal-system.svc", "name on the coordinator's TLS certificate")
	fs.StringVar(&o.CAFile, "ca-file", "/etc/shoal/ca/ca.crt", "PEM bundle of the coordinator's CA")
	fs.StringVar(&o.TokenFile, "token-file", "/var/run/secrets/shoal/token", "projected ServiceAccount token presented to the coordinator")
	fs.StringVar(&o.MeshKeyFile, "mesh-key-file", "/etc/shoal/mesh/key", "mesh encryption key (16, 24 or 32 bytes, raw or base64)")
	fs.IntVar(&o.MeshBindPort, "mesh-bind-port", 7946, "memberlist TCP and UDP port")
	fs.StringVar(&o.MeshAdvertise, "mesh-advertise", os.Getenv("HOST_IP"), "address other agents reach this one at (env HOST_IP)")
	fs.StringVar(&o.RuntimeEndpoint, "runtime-endpoint", "", "CRI socket, e.g. unix:///run/containerd/containerd.sock (empty: detect)")
	fs.StringVar(&o.HostRoot, "host-root", "/host", "where the host's /run is mounted (as <host-root>/run), for runtime detection")
	fs.StringVar(&o.StateDir, "state-dir", "/var/lib/shoal-agent", "directory that keeps accepted work across restarts")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9480", "address of /metrics, /healthz, /readyz (open), /inventory and /mesh (bearer token allowed to get them: ClusterRole shoal-agent-endpoints-reader)")
	fs.StringVar(&o.Zone, "zone", "", "the node's topology zone, if known")
	fs.IntVar(&o.MaxConcurrentPulls, "max-concurrent-pulls", work.DefaultMaxConcurrentPulls, "most image pulls (ImagePullJob work) that run at once on the node")
	fs.IntVar(&o.P2PPort, "p2p-port", 30020, "image swarm port on --mesh-advertise (peers and trackers); 0 turns the swarm and the registry mirror off")
	fs.BoolVar(&o.PlainPeers, "plain-peers", false, "serve and reach peers over plain HTTP, without mutual TLS (only while upgrading from agents without peer TLS)")
	fs.IntVar(&o.MirrorPort, "mirror-port", 30021, "registry mirror port on 127.0.0.1, written into containerd's hosts.toml")
	mirrors := fs.String("mirror-registries", "_default", "registries to mirror for the runtime, comma-separated: host[:port], or host=http://server for a plain-HTTP registry; _default covers every registry without a hosts directory of its own")
	fs.StringVar(&o.CertsDir, "containerd-certs-dir", "", "containerd's hosts.toml directory as mounted in the agent (empty: --host-root + containerd's config_path)")
	fs.Int64Var(&o.ImageStoreQuota, "image-store-quota", 20<<30, "bytes the swarm's blob store may use under --state-dir/images (0: no quota)")
	fs.Int64Var(&o.IngressBytesPerSecond, "ingress-bytes-per-second", 0, "cap on the swarm's download rate (0: none)")
	fs.Int64Var(&o.EgressBytesPerSecond, "egress-bytes-per-second", 0, "cap on the swarm's upload rate to peers (0: none)")
	fs.IntVar(&o.MaxPeerUploads, "max-peer-uploads", 0, "uploads to peers at once; more are answered 429 (0: the default, 4)")
	fs.BoolVar(&o.Profiling, "profiling", false, "serve Go runtime profiles under /debug/pprof/ on --metrics-addr (to tokens allowed to get them, as /inventory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.MirrorRegistries, err = agent.ParseMirrorRegistries(*mirrors); err != nil {
		return err
	}
	switch {
	case o.P2PPort < 0 || o.P2PPort > 65535 || o.MirrorPort < 1 || o.MirrorPort > 65535:
		return fmt.Errorf("--p2p-port must be 0 to 65535 and --mirror-port 1 to 65535")
	case o.ImageStoreQuota < 0 || o.IngressBytesPerSecond < 0 || o.EgressBytesPerSecond < 0 || o.MaxPeerUploads < 0:
		return fmt.Errorf("--image-store-quota, --ingress-bytes-per-second, --egress-bytes-per-second and --max-peer-uploads must not be negative")
	case o.NodeName == "":
		return fmt.Errorf("--node-name (or env NODE_NAME) is required")
	case o.MeshAdvertise == "":
		return fmt.Errorf("--mesh-advertise (or env HOST_IP) is required")
	case o.Coordinator == "":
		return fmt.Errorf("--coordinator is required outside a pod (no SHOAL_COORDINATOR_SERVICE_HOST)")
	case o.MaxConcurrentPulls < 1:
		return fmt.Errorf("--max-concurrent-pulls must be at least 1, not %d", o.MaxConcurrentPulls)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := klog.Background().WithValues("node", o.NodeName)
	log.Info("Starting shoal-agent", "version", version, "coordinator", o.Coordinator)
	return agent.Run(klog.NewContext(ctx, log), o)
}

// defaultCoordinator reads the Service env vars kubelet injects.
func defaultCoordinator() string {
	host, port := os.Getenv("SHOAL_COORDINATOR_SERVICE_HOST"), os.Getenv("SHOAL_COORDINATOR_SERVICE_PORT")
	if host == "" || port == "" {
		return ""
	}
	return net.JoinHostPort(host, port)
}
