// Package imagewarm will hold the agent's peer-to-peer image warm-up: a
// content-addressed blob store, trackers chosen by rendezvous hashing,
// upstream leases, piece transfer between agents, sha256 verification, and
// the registry mirror containerd pulls through.
package imagewarm
