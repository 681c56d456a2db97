// Package p2p benchmarks the image swarm (make bench-p2p): many agents pull
// the same image at once from an in-process OCI registry whose aggregate
// egress is throttled, sharing layers peer to peer, and the benchmark
// reports how long each node took (as a CDF plot), how many bytes came from
// the registry versus from peers, and what the agents cost in CPU and
// memory. The benchmark and its support code are test files, so the package
// holds no code outside them.
package p2p
