// Package cri will own the agent's access to the container runtime: socket
// detection (containerd, CRI-O, cri-dockerd), a CRI client, and the node
// inventory of pods and containers read from the labels kubelet writes.
package cri
