package probes

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestTimingsDefaults(t *testing.T) {
	tests := []struct {
		name  string
		probe corev1.Probe
		want  timings
	}{
		{name: "zero values count as 1", want: timings{period: time.Second, initialDelay: time.Second, timeout: time.Second, success: 1, failure: 1}},
		{name: "negative values count as 1", probe: corev1.Probe{PeriodSeconds: -5, InitialDelaySeconds: -1, TimeoutSeconds: -1, SuccessThreshold: -1, FailureThreshold: -3},
			want: timings{period: time.Second, initialDelay: time.Second, timeout: time.Second, success: 1, failure: 1}},
		{name: "set values kept", probe: corev1.Probe{PeriodSeconds: 10, InitialDelaySeconds: 5, TimeoutSeconds: 3, SuccessThreshold: 2, FailureThreshold: 4},
			want: timings{period: 10 * time.Second, initialDelay: 5 * time.Second, timeout: 3 * time.Second, success: 2, failure: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, timingsOf(&tc.probe))
		})
	}
}

func TestResolvePort(t *testing.T) {
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090, HostPort: 19090}}
	tests := []struct {
		name    string
		port    intstr.IntOrString
		want    int
		wantErr string
	}{
		{name: "number", port: intstr.FromInt32(80), want: 80},
		{name: "name", port: intstr.FromString("http"), want: 8080},
		{name: "name resolves to the container port, not the host port", port: intstr.FromString("metrics"), want: 9090},
		{name: "number written as a string", port: intstr.FromString("8443"), want: 8443},
		{name: "unknown name", port: intstr.FromString("grpc"), wantErr: `port "grpc" is not a port name of the container nor a number`},
		{name: "zero", port: intstr.FromInt32(0), wantErr: "invalid port number 0"},
		{name: "too large", port: intstr.FromInt32(70000), wantErr: "invalid port number 70000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolvePort(tc.port, ports)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int // length in bytes
	}{
		{name: "short", in: "ok", want: 2},
		{name: "exactly the limit", in: strings.Repeat("a", MaxMessageBytes), want: MaxMessageBytes},
		{name: "ASCII over the limit", in: strings.Repeat("a", 3000), want: MaxMessageBytes},
		{name: "multi-byte runes are not split", in: strings.Repeat("€", 400), want: 1023}, // 3 bytes each
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := truncate(tc.in, MaxMessageBytes)
			require.Len(t, got, tc.want)
			require.True(t, utf8.ValidString(got))
			require.True(t, strings.HasPrefix(tc.in, got))
		})
	}
}

// hostPort splits a test server's URL into host and port.
func hostPort(t *testing.T, rawURL string) (string, int32) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return u.Hostname(), int32(port)
}

func httpSpec(host string, port intstr.IntOrString, path string, headers ...corev1.HTTPHeader) *Spec {
	return &Spec{
		Key:   Key{PodUID: "u", Container: "app", ProbeName: "p"},
		PodIP: host,
		Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: port, HTTPHeaders: headers}}},
	}
}

// TestHTTPProbe runs HTTP probes against loopback servers.
func TestHTTPProbe(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write([]byte("elsewhere"))
	}))
	defer other.Close()
	_, otherPort := hostPort(t, other.URL)

	var lastReq atomic.Pointer[http.Request]
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		lastReq.Store(r)
		_, _ = w.Write([]byte("healthy " + r.URL.RawQuery))
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready"))
	})
	mux.HandleFunc("/teapot", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux.HandleFunc("/local-redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/local-redirect-fail", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/fail", http.StatusFound) })
	mux.HandleFunc("/remote-redirect", func(w http.ResponseWriter, r *http.Request) {
		// localhost is another host name than the 127.0.0.1 probed.
		http.Redirect(w, r, "http://localhost:"+strconv.Itoa(int(otherPort))+"/", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("part one, "))
		w.(http.Flusher).Flush() // no Content-Length: the body is chunked
		_, _ = w.Write([]byte("part two"))
	})
	mux.HandleFunc("/continue-then-ok", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = w.Write([]byte("after hints"))
	})
	var tlsAddr atomic.Pointer[string] // the TLS server's, once it listens
	mux.HandleFunc("/to-https", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://"+*tlsAddr.Load()+"/ok", http.StatusFound)
	})
	mux.HandleFunc("/hang", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(strings.Repeat("x", 5000))) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	_, tlsPort := hostPort(t, tlsSrv.URL)
	tlsHostPort := tlsSrv.Listener.Addr().String()
	tlsAddr.Store(&tlsHostPort)

	closed := httptest.NewServer(mux)
	_, closedPort := hostPort(t, closed.URL)
	closed.Close()

	p := newProber(nil, (&net.Dialer{}).DialContext)
	tests := []struct {
		name    string
		spec    *Spec
		want    State
		wantMsg string // substring
		check   func(t *testing.T)
	}{
		{name: "2xx succeeds with the body", spec: httpSpec(host, intstr.FromInt32(port), "/ok?x=1"), want: StateSucceeded, wantMsg: "healthy x=1",
			check: func(t *testing.T) {
				r := lastReq.Load()
				require.Equal(t, UserAgent, r.UserAgent())
				require.Equal(t, "*/*", r.Header.Get("Accept"))
				require.True(t, r.Close, "the probe asks for the connection to be closed (keep-alives off)")
				require.Empty(t, r.Header.Get("Accept-Encoding"), "no compression, as the kubelet's probes")
			}},
		{name: "path without a leading slash", spec: httpSpec(host, intstr.FromInt32(port), "ok"), want: StateSucceeded, wantMsg: "healthy"},
		{name: "headers: user agent and host", spec: httpSpec(host, intstr.FromInt32(port), "/ok",
			corev1.HTTPHeader{Name: "User-Agent", Value: "custom"}, corev1.HTTPHeader{Name: "Host", Value: "web.example"}, corev1.HTTPHeader{Name: "X-Probe", Value: "1"}),
			want: StateSucceeded, check: func(t *testing.T) {
				r := lastReq.Load()
				require.Equal(t, "custom", r.UserAgent())
				require.Equal(t, "web.example", r.Host)
				require.Equal(t, "1", r.Header.Get("X-Probe"))
			}},
		{name: "5xx fails with the status", spec: httpSpec(host, intstr.FromInt32(port), "/fail"), want: StateFailed, wantMsg: "status 503"},
		{name: "4xx fails", spec: httpSpec(host, intstr.FromInt32(port), "/teapot"), want: StateFailed, wantMsg: "status 418"},
		{name: "redirect to the same host is followed", spec: httpSpec(host, intstr.FromInt32(port), "/local-redirect"), want: StateSucceeded, wantMsg: "healthy"},
		{name: "followed redirect to a failing page fails", spec: httpSpec(host, intstr.FromInt32(port), "/local-redirect-fail"), want: StateFailed, wantMsg: "status 503"},
		{name: "redirect to another host is not followed and succeeds", spec: httpSpec(host, intstr.FromInt32(port), "/remote-redirect"), want: StateSucceeded, wantMsg: "not followed",
			check: func(t *testing.T) { require.Zero(t, elsewhere.Load(), "the other host was contacted") }},
		{name: "redirect loop fails", spec: httpSpec(host, intstr.FromInt32(port), "/loop"), want: StateFailed, wantMsg: "stopped after 10 redirects"},
		{name: "long body is truncated", spec: httpSpec(host, intstr.FromInt32(port), "/big"), want: StateSucceeded, check: func(t *testing.T) {}},
		{name: "connection refused fails", spec: httpSpec(host, intstr.FromInt32(closedPort), "/ok"), want: StateFailed, wantMsg: "connection refused"},
		{name: "named port", spec: func() *Spec {
			s := httpSpec(host, intstr.FromString("web"), "/ok")
			s.ContainerPorts = []corev1.ContainerPort{{Name: "web", ContainerPort: port}}
			return s
		}(), want: StateSucceeded, wantMsg: "healthy"},
		{name: "unknown port name fails", spec: httpSpec(host, intstr.FromString("web"), "/ok"), want: StateFailed, wantMsg: `port "web" is not a port name`},
		{name: "https without verification", spec: func() *Spec {
			s := httpSpec(host, intstr.FromInt32(tlsPort), "/ok")
			s.Probe.HTTPGet.Scheme = corev1.URISchemeHTTPS
			return s
		}(), want: StateSucceeded, wantMsg: "healthy"},
		{name: "chunked body", spec: httpSpec(host, intstr.FromInt32(port), "/chunked"), want: StateSucceeded, wantMsg: "part one, part two"},
		{name: "informational answers are skipped", spec: httpSpec(host, intstr.FromInt32(port), "/continue-then-ok"), want: StateSucceeded, wantMsg: "after hints"},
		{name: "redirect to https on the same host is followed", spec: httpSpec(host, intstr.FromInt32(port), "/to-https"), want: StateSucceeded, wantMsg: "healthy"},
		{name: "no answer within the timeout fails", spec: httpSpec(host, intstr.FromInt32(port), "/hang"), want: StateFailed, wantMsg: "timed out after 1s"},
		{name: "handler host wins over the pod IP", spec: func() *Spec {
			s := httpSpec("192.0.2.1", intstr.FromInt32(port), "/ok")
			s.Probe.HTTPGet.Host = host
			return s
		}(), want: StateSucceeded, wantMsg: "healthy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, msg, err := p.probe(context.Background(), tc.spec, timingsOf(&tc.spec.Probe), "")
			require.NoError(t, err)
			require.Equal(t, tc.want, st, "message: %s", msg)
			require.Contains(t, msg, tc.wantMsg)
			require.LessOrEqual(t, len(msg), MaxMessageBytes)
			if tc.check != nil {
				tc.check(t)
			}
		})
	}

	t.Run("a canceled probe gives no verdict at once", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		spec := httpSpec(host, intstr.FromInt32(port), "/hang")
		spec.Probe.TimeoutSeconds = 60
		start := time.Now()
		_, _, err := p.probe(ctx, spec, timingsOf(&spec.Probe), "")
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(start), 30*time.Second, "the probe waited for its timeout, not for the cancel")
	})

	t.Run("no pod IP gives no verdict", func(t *testing.T) {
		_, _, err := p.probe(context.Background(), httpSpec("", intstr.FromInt32(port), "/ok"), timingsOf(&corev1.Probe{}), "")
		require.ErrorContains(t, err, "no IP")
	})
}

// TestTCPProbe runs TCP probes against loopback listeners.
func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gonePort := int32(gone.Addr().(*net.TCPAddr).Port)
	require.NoError(t, gone.Close())

	spec := func(port intstr.IntOrString, ports ...corev1.ContainerPort) *Spec {
		return &Spec{
			Key: Key{PodUID: "u", Container: "app", ProbeName: "p"}, PodIP: "127.0.0.1", ContainerPorts: ports,
			Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}},
		}
	}
	tests := []struct {
		name    string
		spec    *Spec
		want    State
		wantMsg string
	}{
		{name: "connect succeeds", spec: spec(intstr.FromInt32(port)), want: StateSucceeded},
		{name: "named port", spec: spec(intstr.FromString("game"), corev1.ContainerPort{Name: "game", ContainerPort: port}), want: StateSucceeded},
		{name: "refused fails", spec: spec(intstr.FromInt32(gonePort)), want: StateFailed, wantMsg: "connection refused"},
		{name: "unknown port name fails", spec: spec(intstr.FromString("game")), want: StateFailed, wantMsg: `port "game" is not a port name of the container`},
	}
	p := newProber(nil, (&net.Dialer{}).DialContext)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, msg, err := p.probe(context.Background(), tc.spec, timingsOf(&tc.spec.Probe), "")
			require.NoError(t, err)
			require.Equal(t, tc.want, st, "message: %s", msg)
			require.Contains(t, msg, tc.wantMsg)
		})
	}
}

func TestUnsupportedHandlers(t *testing.T) {
	p := newProber(nil, nil)
	tests := []struct {
		name    string
		handler corev1.ProbeHandler
		wantMsg string
	}{
		{name: "none", wantMsg: "no handler"},
		{name: "grpc", handler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}, wantMsg: "gRPC probes are not supported"},
		{name: "empty exec command", handler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}, wantMsg: "empty command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Spec{Probe: corev1.Probe{ProbeHandler: tc.handler}}
			st, msg, err := p.probe(context.Background(), s, timingsOf(&s.Probe), "c1")
			require.NoError(t, err)
			require.Equal(t, StateFailed, st)
			require.Contains(t, msg, tc.wantMsg)
		})
	}
}
