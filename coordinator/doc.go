// Package coordinator will hold shoal-coordinator, the thin, leader-elected
// central program: it watches Shoal's kinds and core objects, turns them
// into per-node work streamed to agents, owns workload rollout decisions,
// serves the admission webhooks, and is the only writer of status.
package coordinator
