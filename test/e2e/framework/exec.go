package framework

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// MaxLogBytes caps how much of a container log Logs reads.
const MaxLogBytes = 10 << 20

// Exec runs cmd in a container of pod ns/pod, without a TTY or stdin, and
// returns what it wrote. It speaks the WebSocket protocol and falls back to
// SPDY when the server cannot upgrade to it, as kubectl exec does. A
// non-zero exit status is an error (stdout and stderr are still returned).
func (c *Clients) Exec(ctx context.Context, ns, pod, container string, cmd []string) (stdout, stderr string, err error) {
	req := c.Kube.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   cmd,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)

	ws, err := remotecommand.NewWebSocketExecutor(c.RESTConfig, "GET", req.URL().String())
	if err != nil {
		return "", "", fmt.Errorf("websocket executor: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.RESTConfig, "POST", req.URL())
	if err != nil {
		return "", "", fmt.Errorf("spdy executor: %w", err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", fmt.Errorf("exec executor: %w", err)
	}

	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		err = fmt.Errorf("exec %q in %s/%s[%s]: %w (stderr: %q)", cmd, ns, pod, container, err, errOut.String())
	}
	return out.String(), errOut.String(), err
}

// Logs returns the log of a container of pod ns/pod (at most MaxLogBytes);
// previous asks for the log of the container's last terminated instance.
func (c *Clients) Logs(ctx context.Context, ns, pod, container string, previous bool) (string, error) {
	limit := int64(MaxLogBytes)
	data, err := c.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{
		Container:  container,
		Previous:   previous,
		LimitBytes: &limit,
	}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s/%s[%s] (previous=%t): %w", ns, pod, container, previous, err)
	}
	return string(data), nil
}
