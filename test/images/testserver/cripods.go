package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criremote "k8s.io/cri-client/pkg"
)

// watchInterval is how often cri-pods --watch prints the pods again.
const watchInterval = 5 * time.Second

// criTimeout bounds connecting to the runtime and each call to it.
const criTimeout = 10 * time.Second

// podLine is what cri-pods prints for one pod sandbox, as a JSON line.
type podLine struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
	State     string `json:"state"`
}

// criPods prints one JSON line per pod sandbox of the CRI runtime at socket.
// With interval > 0 it prints them again every interval until ctx is done,
// reporting errors to stderr instead of stopping.
func criPods(ctx context.Context, socket string, interval time.Duration, out io.Writer) error {
	svc, err := criremote.NewRemoteRuntimeService(ctx, "unix://"+socket, criTimeout, nil, false)
	if err != nil {
		return fmt.Errorf("connect to CRI runtime at %s: %w", socket, err)
	}
	defer func() { _ = svc.Close(context.WithoutCancel(ctx)) }()

	for {
		err := printPods(ctx, svc, out)
		if interval <= 0 {
			return err
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cri-pods: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// podLister is the part of the CRI runtime service that printPods uses.
type podLister interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
}

// printPods lists the pod sandboxes once and prints them.
func printPods(ctx context.Context, svc podLister, out io.Writer) error {
	pods, err := svc.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	enc := json.NewEncoder(out)
	for _, p := range pods {
		md := p.GetMetadata()
		line := podLine{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid(), State: p.GetState().String()}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("write pod line: %w", err)
		}
	}
	return nil
}
