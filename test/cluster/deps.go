package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// debianPackages maps each Debian package the cluster needs to a file it
// installs, used to tell whether it is present.
var debianPackages = []struct{ pkg, file string }{
	{"containerd", "/usr/bin/containerd"},
	{"runc", "/usr/sbin/runc"},
	{"containernetworking-plugins", "/usr/lib/cni/bridge"},
	{"iproute2", "/usr/sbin/ip"},
	{"iptables", "/usr/sbin/iptables"},
	{"busybox-static", "/bin/busybox"},
	{"util-linux", "/usr/bin/nsenter"},
	{"conntrack", "/usr/sbin/conntrack"},
	// Not the cluster's own: the dashboard e2e scrapes Shoal on the
	// cluster with Debian's Prometheus.
	{"prometheus", "/usr/bin/prometheus"},
}

// CNIBinDir is where Debian installs the CNI plugins.
const CNIBinDir = "/usr/lib/cni"

// EnsurePackages installs the Debian packages the cluster needs that are
// missing, with apt-get. It needs root.
func EnsurePackages(ctx context.Context, log io.Writer) error {
	var missing []string
	for _, p := range debianPackages {
		if _, err := os.Stat(p.file); err != nil {
			missing = append(missing, p.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("packages %s are missing and installing them needs root: run as root or apt-get install them", strings.Join(missing, " "))
	}
	_, _ = fmt.Fprintf(log, "installing Debian packages: %s\n", strings.Join(missing, " "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"apt-get", "update", "-qq"},
		append([]string{"apt-get", "install", "-y", "-qq", "--no-install-recommends"}, missing...),
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}
