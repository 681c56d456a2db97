package probes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// MaxMessageBytes bounds a result's message, as OpenKruise's daemon
	// does (1024); longer output is cut at a UTF-8 boundary.
	MaxMessageBytes = 1024
	// UserAgent is the User-Agent of HTTP probes whose headers set none.
	UserAgent = "kube-probe/shoal"
	// maxBodyBytes bounds what is read of an HTTP probe's response body.
	maxBodyBytes = 10 << 10
	// maxRedirects is how many same-host redirects an HTTP probe follows.
	maxRedirects = 10
	// execSlack is how much longer than its timeout an exec probe may wait
	// for the runtime to answer before it counts as timed out; the runtime
	// enforces the timeout itself, this only guards a runtime that hangs.
	execSlack = 5 * time.Second
)

// Probe kinds, the "kind" label of the results metric.
const (
	kindExec    = "exec"
	kindTCP     = "tcp"
	kindHTTP    = "http"
	kindUnknown = "unsupported"
)

// timings are a probe's timing fields with OpenKruise's daemon defaults
// applied: a value below 1 counts as 1.
type timings struct {
	period, initialDelay, timeout time.Duration
	success, failure              int
}

func timingsOf(p *corev1.Probe) timings {
	atLeast1 := func(v int32) int32 { return max(v, 1) }
	return timings{
		period:       time.Duration(atLeast1(p.PeriodSeconds)) * time.Second,
		initialDelay: time.Duration(atLeast1(p.InitialDelaySeconds)) * time.Second,
		timeout:      time.Duration(atLeast1(p.TimeoutSeconds)) * time.Second,
		success:      int(atLeast1(p.SuccessThreshold)),
		failure:      int(atLeast1(p.FailureThreshold)),
	}
}

// kindOf names the probe's handler.
func kindOf(h *corev1.ProbeHandler) string {
	switch {
	case h.Exec != nil:
		return kindExec
	case h.TCPSocket != nil:
		return kindTCP
	case h.HTTPGet != nil:
		return kindHTTP
	default:
		return kindUnknown
	}
}

// DialFunc dials a TCP address, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// prober runs one probe. Safe for concurrent use.
type prober struct {
	rt   Runtime
	dial DialFunc
	http *httpGetter
}

func newProber(rt Runtime, dial DialFunc) *prober {
	return &prober{rt: rt, dial: dial, http: newHTTPGetter(dial)}
}

// probe runs the spec's handler once against the container with CRI id
// containerID. A nil error comes with a verdict (Succeeded or Failed) and
// its message, at most MaxMessageBytes long; an error means the probe could
// not be run (the runtime did not answer, the pod has no address) and
// gives no verdict.
func (p *prober) probe(ctx context.Context, s *Spec, t timings, containerID string) (State, string, error) {
	var (
		st  State
		msg string
		err error
	)
	h := &s.Probe.ProbeHandler
	switch {
	case h.Exec != nil:
		st, msg, err = p.exec(ctx, h.Exec, t.timeout, containerID)
	case h.TCPSocket != nil:
		st, msg, err = p.tcp(ctx, h.TCPSocket, s, t.timeout)
	case h.HTTPGet != nil:
		st, msg, err = p.httpGet(ctx, h.HTTPGet, s, t.timeout)
	case h.GRPC != nil:
		st, msg = StateFailed, "gRPC probes are not supported by PodProbeMarker"
	default:
		st, msg = StateFailed, "the probe has no handler (exec, tcpSocket or httpGet)"
	}
	return st, truncate(msg, MaxMessageBytes), err
}

// exec runs the command through the runtime: exit code 0 succeeds with
// stdout, another exit code fails with stderr, and a timeout fails (as in
// the kubelet); any other runtime error gives no verdict.
func (p *prober) exec(ctx context.Context, a *corev1.ExecAction, timeout time.Duration, containerID string) (State, string, error) {
	if len(a.Command) == 0 {
		return StateFailed, "exec probe has an empty command", nil
	}
	ectx, cancel := context.WithTimeout(ctx, timeout+execSlack)
	defer cancel()
	stdout, stderr, code, err := p.rt.ExecSync(ectx, containerID, a.Command, timeout)
	switch {
	case err == nil && code == 0:
		return StateSucceeded, string(stdout), nil
	case err == nil:
		return StateFailed, string(stderr), nil
	case errors.Is(err, ErrExecTimeout),
		ctx.Err() == nil && errors.Is(ectx.Err(), context.DeadlineExceeded):
		return StateFailed, fmt.Sprintf("command %q timed out after %s", strings.Join(a.Command, " "), timeout), nil
	default:
		return "", "", fmt.Errorf("exec probe in container %s: %w", containerID, err)
	}
}

// tcp connects to the port: a connection succeeds, anything else
// (refused, unreachable, timed out) fails with the error.
func (p *prober) tcp(ctx context.Context, a *corev1.TCPSocketAction, s *Spec, timeout time.Duration) (State, string, error) {
	host, err := targetHost(a.Host, s.PodIP)
	if err != nil {
		return "", "", err
	}
	port, err := resolvePort(a.Port, s.ContainerPorts)
	if err != nil {
		return StateFailed, err.Error(), nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := p.dial(dctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("tcp probe %s: %w", addr, ctx.Err())
		}
		if errors.Is(dctx.Err(), context.DeadlineExceeded) {
			return StateFailed, fmt.Sprintf("dial tcp %s: timed out after %s", addr, timeout), nil
		}
		return StateFailed, err.Error(), nil
	}
	_ = conn.Close()
	return StateSucceeded, "", nil
}

// httpGet sends the GET: a status in 200-399 succeeds with the body (a
// redirect to another host is not followed and succeeds), another status
// or a failed request fails.
func (p *prober) httpGet(ctx context.Context, a *corev1.HTTPGetAction, s *Spec, timeout time.Duration) (State, string, error) {
	host, err := targetHost(a.Host, s.PodIP)
	if err != nil {
		return "", "", err
	}
	port, err := resolvePort(a.Port, s.ContainerPorts)
	if err != nil {
		return StateFailed, err.Error(), nil
	}
	scheme := "http"
	if strings.EqualFold(string(a.Scheme), string(corev1.URISchemeHTTPS)) {
		scheme = "https"
	}
	u, err := url.Parse(a.Path)
	if err != nil {
		return StateFailed, fmt.Sprintf("http probe path %q: %v", a.Path, err), nil
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	if u.Path == "" && u.Opaque == "" {
		u.Path = "/"
	}
	target := u.String()

	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, target, nil)
	if err != nil {
		return StateFailed, fmt.Sprintf("http probe %s: %v", target, err), nil
	}
	for _, hd := range a.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", UserAgent)
	}
	if v, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	} else if len(v) == 1 && v[0] == "" {
		// An explicitly empty Accept header means "send none", as in the
		// kubelet.
		req.Header.Del("Accept")
	}
	ans, err := p.http.get(hctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("http probe %s: %w", target, ctx.Err())
		}
		if timedOut(err) {
			return StateFailed, fmt.Sprintf("http probe %s: timed out after %s", target, timeout), nil
		}
		return StateFailed, fmt.Sprintf("http probe %s: %v", target, err), nil
	}
	switch code := ans.status; {
	case code >= 200 && code < 300:
		if ans.bodyErr != nil {
			if timedOut(ans.bodyErr) {
				return StateFailed, fmt.Sprintf("http probe %s: timed out after %s reading the body", target, timeout), nil
			}
			return StateFailed, fmt.Sprintf("http probe %s: reading the body: %v", target, ans.bodyErr), nil
		}
		return StateSucceeded, string(ans.body), nil
	case code >= 300 && code < 400:
		return StateSucceeded, fmt.Sprintf("http probe %s: status %d, redirect to %q not followed", target, code, ans.location), nil
	default:
		return StateFailed, fmt.Sprintf("http probe %s: status %d", target, code), nil
	}
}

// targetHost is the handler's host, else the pod's IP. No address at all
// gives an error: no verdict until the spec brings one.
func targetHost(host, podIP string) (string, error) {
	if host != "" {
		return host, nil
	}
	if podIP == "" {
		return "", errors.New("the pod has no IP to probe yet")
	}
	return podIP, nil
}

// resolvePort turns a handler's port into a number: a number as is, a name
// through the container's ports (or, as the kubelet does as a last resort,
// a number written as a string).
func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	var port int
	switch p.Type {
	case intstr.Int:
		port = int(p.IntVal)
	case intstr.String:
		found := false
		for _, cp := range ports {
			if cp.Name == p.StrVal {
				port, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return 0, fmt.Errorf("port %q is not a port name of the container nor a number", p.StrVal)
			}
			port = n
		}
	default:
		return 0, fmt.Errorf("port %v has no type", p)
	}
	if port <= 0 || port > 65535 {
		return 0, fmt.Errorf("invalid port number %d (%s)", port, p.String())
	}
	return port, nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
