// Package mirror makes the agent the node's registry mirror for
// containerd: it writes the agent's host into containerd's per-registry
// hosts.toml (the CRI plugin's registry config_path, usually
// /etc/containerd/certs.d) ahead of every other host, so that containerd
// tries the agent first and falls back to the other hosts and then to
// `server` when the agent fails.
//
// The agent's part of a hosts.toml is a text block between two marker
// comments. Whatever else is in the file (a cluster's own hosts, its
// `server`, comments) is kept byte for byte: Install only adds or replaces
// the block and Uninstall only removes it. A file the agent created is
// marked as such and deleted by Uninstall once nothing but the agent's own
// `server` line is left.
//
// containerd reads hosts.toml on every pull, so a change needs no restart
// (containerd docs/hosts.md). Callers serialize Install and Uninstall for
// one certs directory; the package does not lock.
package mirror
