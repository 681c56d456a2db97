package probes

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// httpGetter sends an HTTP probe's requests: HTTP/1.1 over a new
// connection per request, closed after the response, as the kubelet's
// probes do (keep-alives off, no compression, no proxy). It does not go
// through net/http's Transport, which for a connection used once starts a
// reader and a writer goroutine and hands the response between them; on
// a node with a hundred probes a second that bookkeeping cost more CPU
// than the dial (make bench-probecost). Safe for concurrent use.
type httpGetter struct {
	dial DialFunc
	tls  *tls.Config // for https; Kubernetes probes do not verify the pod's certificate
}

func newHTTPGetter(dial DialFunc) *httpGetter {
	return &httpGetter{
		dial: dial,
		tls:  &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes skip verification, as the kubelet's do
	}
}

// errTooManyRedirects ends a probe whose redirects go on past maxRedirects.
var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", maxRedirects)

// answer is what an HTTP probe keeps of a response.
type answer struct {
	status   int
	location string // the Location header
	body     []byte // at most maxBodyBytes of it
	bodyErr  error  // reading the body failed after the status arrived
}

// get sends req and follows redirects to the same host name, at most
// maxRedirects of them, as the kubelet's prober does. A redirect to
// another host is not followed: its answer is returned. ctx bounds the
// whole exchange, redirects included.
func (g *httpGetter) get(ctx context.Context, req *http.Request) (*answer, error) {
	first := req.URL.Hostname()
	for redirects := 0; ; redirects++ {
		a, err := g.roundTrip(ctx, req)
		if err != nil {
			return nil, err
		}
		if !followable(a.status) || a.location == "" {
			return a, nil
		}
		next, err := req.URL.Parse(a.location)
		if err != nil {
			return nil, fmt.Errorf("status %d: bad Location %q: %w", a.status, a.location, err)
		}
		if next.Hostname() != first {
			return a, nil
		}
		if redirects >= maxRedirects {
			return nil, errTooManyRedirects
		}
		nreq, err := http.NewRequestWithContext(ctx, http.MethodGet, next.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("redirect to %q: %w", a.location, err)
		}
		nreq.Header = req.Header
		if next.Host == req.URL.Host {
			nreq.Host = req.Host // a Host header set by the probe stays on the same server
		}
		req = nreq
	}
}

// followable reports whether a status is a redirect an HTTP client follows.
func followable(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// aLongTimeAgo is a deadline in the past: it makes a blocked read or
// write on a connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip sends one request over a connection of its own.
func (g *httpGetter) roundTrip(ctx context.Context, req *http.Request) (*answer, error) {
	addr := req.URL.Host
	if req.URL.Port() == "" {
		port := "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(req.URL.Hostname(), port)
	}
	conn, err := g.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return nil, fmt.Errorf("set deadline: %w", err)
		}
	}
	// A canceled probe (the runner stopping) must not wait for the pod.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	defer stop()
	if req.URL.Scheme == "https" {
		cfg := g.tls.Clone()
		cfg.ServerName = req.URL.Hostname()
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		conn = tc
	}

	req.Close = true // "Connection: close", as with keep-alives off
	w := bufio.NewWriterSize(conn, 1024)
	if err := req.Write(w); err != nil {
		return nil, fmt.Errorf("write the request: %w", err)
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("write the request: %w", err)
	}
	r := bufio.NewReaderSize(conn, 4096)
	for {
		resp, err := http.ReadResponse(r, req)
		if err != nil {
			return nil, fmt.Errorf("read the response: %w", err)
		}
		// Informational answers (100 Continue, 103 Early Hints) come before
		// the real one.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		a := &answer{status: resp.StatusCode, location: resp.Header.Get("Location")}
		a.body, a.bodyErr = io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
		_ = resp.Body.Close()
		return a, nil
	}
}

// timedOut reports whether err is a connection's deadline passing.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}
