package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// run executes a command and returns its combined output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runTolerant runs a command whose failure with one of the given messages
// means "already in the wanted state" (for idempotent setup and teardown).
func runTolerant(ctx context.Context, okMessages []string, name string, args ...string) error {
	err := run(ctx, name, args...)
	if err == nil {
		return nil
	}
	for _, m := range okMessages {
		if strings.Contains(err.Error(), m) {
			return nil
		}
	}
	return err
}

var (
	exists  = []string{"File exists", "already exists"}
	missing = []string{"Cannot find device", "No such file or directory", "does not exist", "No such process", "Invalid argument"}
)

// NetnsName is the network namespace of a node (same as its name).
func NetnsName(node string) string { return node }

// NetnsPath is where `ip netns` keeps the namespace of a node.
func NetnsPath(node string) string { return "/var/run/netns/" + NetnsName(node) }

// setupBridge creates the root-namespace bridge all nodes hang off.
func setupBridge(ctx context.Context) error {
	steps := [][]string{
		{"ip", "link", "add", BridgeName, "type", "bridge"},
		{"ip", "addr", "add", BridgeCIDR, "dev", BridgeName},
		{"ip", "link", "set", BridgeName, "up"},
	}
	for _, s := range steps {
		if err := runTolerant(ctx, exists, s[0], s[1:]...); err != nil {
			return fmt.Errorf("set up bridge: %w", err)
		}
	}
	return nil
}

// setupNodeNetwork gives node i its namespace, link, address and routes to
// every other node's pods; the root namespace gets a route to node i's
// pods (the apiserver reaches webhooks and aggregated APIs on pod IPs).
func setupNodeNetwork(ctx context.Context, cfg *Config, i int) error {
	node, veth, ns := NodeName(i), VethName(i), NetnsName(NodeName(i))
	inNode := func(args ...string) []string { return append([]string{"ip", "netns", "exec", ns}, args...) }
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", veth, "master", BridgeName},
		{"ip", "link", "set", veth, "up"},
		inNode("ip", "link", "set", "lo", "up"),
		inNode("ip", "addr", "add", NodeIP(i).String()+"/24", "dev", "eth0"),
		inNode("ip", "link", "set", "eth0", "up"),
		inNode("ip", "route", "add", "default", "via", BridgeIP.String()),
		inNode("sysctl", "-qw", "net.ipv4.ip_forward=1"),
		{"ip", "route", "replace", PodCIDR(i), "via", NodeIP(i).String(), "dev", BridgeName},
	}
	for j := 1; j <= cfg.Nodes; j++ {
		if j != i {
			steps = append(steps, inNode("ip", "route", "replace", PodCIDR(j), "via", NodeIP(j).String()))
		}
	}
	for _, s := range steps {
		if err := runTolerant(ctx, exists, s[0], s[1:]...); err != nil {
			return fmt.Errorf("set up network of %s: %w", node, err)
		}
	}
	return nil
}

// teardownNetwork deletes every node namespace and the bridge; links and
// routes go with them.
func teardownNetwork(ctx context.Context) error {
	// Delete the veths first: deleting a namespace removes its links only
	// later, from a kernel work queue.
	links, err := clusterLinks(ctx)
	if err != nil {
		return err
	}
	for _, name := range links {
		if name != BridgeName {
			if err := runTolerant(ctx, missing, "ip", "link", "del", name); err != nil {
				return err
			}
		}
	}
	namespaces, err := clusterNetns(ctx)
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		if err := runTolerant(ctx, missing, "ip", "netns", "del", ns); err != nil {
			return err
		}
	}
	return runTolerant(ctx, missing, "ip", "link", "del", BridgeName)
}

// CutNode disconnects a node from the bridge: it loses the apiserver, the
// registry and every other node, as if its cable were pulled.
func CutNode(ctx context.Context, node string) error {
	i, err := NodeIndex(node)
	if err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", VethName(i), "down")
}

// RestoreNode reconnects a node cut by CutNode.
func RestoreNode(ctx context.Context, node string) error {
	i, err := NodeIndex(node)
	if err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", VethName(i), "up")
}

// Netem shapes a node's traffic in both directions: delay (e.g. "100ms",
// "" for none) and rate (e.g. "10mbit", "" for unlimited). Both empty
// removes the shaping. A rate alone uses the tbf qdisc; a delay needs the
// kernel's netem qdisc (CONFIG_NET_SCH_NETEM), which some kernels lack.
func Netem(ctx context.Context, node, delay, rate string) error {
	i, err := NodeIndex(node)
	if err != nil {
		return err
	}
	var qdisc []string
	switch {
	case delay != "":
		qdisc = []string{"netem", "delay", delay}
		if rate != "" {
			qdisc = append(qdisc, "rate", rate)
		}
	case rate != "":
		bps, err := parseRate(rate)
		if err != nil {
			return err
		}
		// A burst of ~4ms of traffic (at least 16 KiB) keeps tbf at its rate.
		burst := max(bps/8/250, 16<<10)
		qdisc = []string{"tbf", "rate", rate, "burst", fmt.Sprint(burst), "latency", "200ms"}
	}
	ends := []struct {
		prefix []string
		dev    string
	}{{nil, VethName(i)}, {[]string{"ip", "netns", "exec", NetnsName(node)}, "eth0"}}
	for _, end := range ends {
		tc := append(append([]string{}, end.prefix...), "tc", "qdisc")
		var args []string
		if qdisc == nil {
			args = append(tc, "del", "dev", end.dev, "root")
			if err := runTolerant(ctx, append(missing, "Cannot delete qdisc with handle of zero"), args[0], args[1:]...); err != nil {
				return err
			}
			continue
		}
		args = append(append(tc, "replace", "dev", end.dev, "root"), qdisc...)
		if err := run(ctx, args[0], args[1:]...); err != nil {
			if strings.Contains(err.Error(), "qdisc kind is unknown") && qdisc[0] == "netem" {
				return fmt.Errorf("shape %s: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so delay cannot be added here; a rate limit alone works (--rate without --delay)", node)
			}
			return fmt.Errorf("shape %s: %w", node, err)
		}
	}
	return nil
}

// parseRate reads a tc rate in bits per second: 800bit, 100kbit, 10mbit,
// 1gbit.
func parseRate(rate string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(rate, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil || v <= 0 {
				break
			}
			return v * u.mult, nil
		}
	}
	return 0, fmt.Errorf("rate %q: use a positive integer with bit, kbit, mbit or gbit, e.g. 10mbit", rate)
}

// clusterLinks lists the bridge and node veths present in the root
// namespace.
func clusterLinks(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "-o", "link", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip link show: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			if name == BridgeName || strings.HasPrefix(name, "shoal-w") {
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// clusterNetns lists the node network namespaces present on the machine.
func clusterNetns(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], NodePrefix) {
			names = append(names, f[0])
		}
	}
	return names, nil
}
