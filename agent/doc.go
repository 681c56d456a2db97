// Package agent will hold shoal-agent, the program that runs on every node
// (a DaemonSet with hostNetwork): it learns its node's pods from the CRI,
// keeps accepted work and progress in a local state dir, takes per-node work
// from the coordinator over gRPC, and joins the memberlist mesh.
package agent
