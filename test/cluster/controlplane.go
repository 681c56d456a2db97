package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/shoal-io/shoal/test/cluster/pki"
)

// ControlPlaneComponents are the root-namespace processes, in start order.
var ControlPlaneComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// controlPlaneSpecs returns the command line of each component.
func controlPlaneSpecs(cfg *Config, b *pki.Bundle) map[string]procSpec {
	bin := func(name string) string { return filepath.Join(cfg.BinDir(), name) }
	logf := func(name string) string { return filepath.Join(cfg.LogDir(), name+".log") }
	kc := b.Kubeconfig
	return map[string]procSpec{
		"etcd": {Name: "etcd", Log: logf("etcd"), Args: []string{
			cfg.EtcdBinary(),
			"--name=shoal",
			"--data-dir=" + filepath.Join(cfg.StateDir(), "etcd"),
			"--listen-client-urls=http://127.0.0.1:2379",
			"--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380",
			"--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=shoal=http://127.0.0.1:2380",
			"--listen-metrics-urls=http://127.0.0.1:2381",
			// A throwaway test cluster: durability is not worth the fsyncs.
			"--unsafe-no-fsync",
		}},
		"kube-apiserver": {Name: "kube-apiserver", Log: logf("kube-apiserver"), Args: []string{
			bin("kube-apiserver"),
			"--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=" + BridgeIP.String(),
			"--advertise-address=" + BridgeIP.String(),
			fmt.Sprintf("--secure-port=%d", APIServerPort),
			"--service-cluster-ip-range=" + ServiceCIDR,
			"--client-ca-file=" + b.CACert,
			"--tls-cert-file=" + b.APIServerCert,
			"--tls-private-key-file=" + b.APIServerKey,
			"--kubelet-client-certificate=" + b.APIServerKubeletClientCert,
			"--kubelet-client-key=" + b.APIServerKubeletClientKey,
			"--kubelet-certificate-authority=" + b.CACert,
			"--kubelet-preferred-address-types=InternalIP",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + b.ServiceAccountPub,
			"--service-account-signing-key-file=" + b.ServiceAccountKey,
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			// Webhooks and aggregated APIs are reached on their pod IPs.
			"--enable-aggregator-routing=true",
			"--requestheader-client-ca-file=" + b.FrontProxyCACert,
			"--proxy-client-cert-file=" + b.FrontProxyClientCert,
			"--proxy-client-key-file=" + b.FrontProxyClientKey,
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-username-headers=X-Remote-User",
			"--profiling=false",
		}},
		"kube-controller-manager": {Name: "kube-controller-manager", Log: logf("kube-controller-manager"), Args: []string{
			bin("kube-controller-manager"),
			"--kubeconfig=" + kc(pki.ControllerManager),
			"--authentication-kubeconfig=" + kc(pki.ControllerManager),
			"--authorization-kubeconfig=" + kc(pki.ControllerManager),
			"--bind-address=127.0.0.1",
			"--cluster-signing-cert-file=" + b.CACert,
			"--cluster-signing-key-file=" + b.CAKey,
			"--root-ca-file=" + b.CACert,
			"--service-account-private-key-file=" + b.ServiceAccountKey,
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + ServiceCIDR,
			"--controllers=*",
			// PVCs of the default StorageClass get a hostPath PV (see
			// StorageClassName).
			"--enable-hostpath-provisioner=true",
			"--leader-elect=false",
			// Fault tests wait for NotReady; 20s keeps them short.
			"--node-monitor-grace-period=20s",
			"--profiling=false",
		}},
		"kube-scheduler": {Name: "kube-scheduler", Log: logf("kube-scheduler"), Args: []string{
			bin("kube-scheduler"),
			"--kubeconfig=" + kc(pki.Scheduler),
			"--authentication-kubeconfig=" + kc(pki.Scheduler),
			"--authorization-kubeconfig=" + kc(pki.Scheduler),
			"--bind-address=127.0.0.1",
			"--leader-elect=false",
			"--profiling=false",
		}},
	}
}

// healthURL is where each component says it is healthy.
var healthURL = map[string]string{
	"etcd":                    "http://127.0.0.1:2379/health",
	"kube-apiserver":          fmt.Sprintf("https://%s:%d/readyz", BridgeIP, APIServerPort),
	"kube-controller-manager": "https://127.0.0.1:10257/healthz",
	"kube-scheduler":          "https://127.0.0.1:10259/healthz",
}

// startControlPlane starts each component and waits until it is healthy
// before starting the next.
func startControlPlane(ctx context.Context, cfg *Config, b *pki.Bundle) error {
	specs := controlPlaneSpecs(cfg, b)
	for _, name := range ControlPlaneComponents {
		if _, err := startDetached(cfg, specs[name]); err != nil {
			return err
		}
		if err := waitHealthy(ctx, cfg, b, name, 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// waitHealthy polls a component's health endpoint until it answers 200.
func waitHealthy(ctx context.Context, cfg *Config, b *pki.Bundle, name string, timeout time.Duration) error {
	client, err := healthClient(b)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		resp, err := client.Get(healthURL[name])
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if _, ok := runningPid(cfg, name); !ok {
			return fmt.Errorf("%s exited; see %s", name, filepath.Join(cfg.LogDir(), name+".log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %s (%s); see %s", name, timeout, strings.TrimSpace(last), filepath.Join(cfg.LogDir(), name+".log"))
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// healthClient authenticates as admin (the apiserver's /readyz needs it);
// the loopback-only controller-manager and scheduler serve self-signed
// certificates, which it does not check.
func healthClient(b *pki.Bundle) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(b.ClientCert(pki.Admin), b.ClientKey(pki.Admin))
	if err != nil {
		return nil, fmt.Errorf("load admin certificate: %w", err)
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates:       []tls.Certificate{cert},
			InsecureSkipVerify: true, //nolint:gosec // health probes of loopback and bridge addresses the harness owns
		}},
	}, nil
}

// StopComponent stops a control-plane component (SIGTERM, or SIGKILL when
// kill is set), for fault injection.
func StopComponent(ctx context.Context, cfg *Config, name string, kill bool) error {
	if err := knownComponent(name); err != nil {
		return err
	}
	return stopDetached(ctx, cfg, name, kill, 30*time.Second)
}

// StartComponent starts a stopped control-plane component again with its
// original command line and waits until it is healthy.
func StartComponent(ctx context.Context, cfg *Config, name string) error {
	if err := knownComponent(name); err != nil {
		return err
	}
	if err := restartDetached(cfg, name); err != nil {
		return err
	}
	b, err := loadBundle(cfg)
	if err != nil {
		return err
	}
	return waitHealthy(ctx, cfg, b, name, 2*time.Minute)
}

func knownComponent(name string) error {
	for _, c := range ControlPlaneComponents {
		if c == name {
			return nil
		}
	}
	return fmt.Errorf("unknown control-plane component %q; use one of %s", name, strings.Join(ControlPlaneComponents, ", "))
}
