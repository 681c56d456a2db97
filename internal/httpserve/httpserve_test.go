package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestMuxAndServe(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_total", Help: "demo"}))
	notReady := errors.New("informers not synced")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, &http.Server{Handler: Mux(reg, func() error { return notReady })}) }()

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + lis.Addr().String() + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "informers not synced")
	code, _ = get("/healthz")
	require.Equal(t, http.StatusOK, code)
	_, body = get("/metrics")
	require.Contains(t, body, "demo_total 0")

	cancel()
	require.NoError(t, <-done)
	_, err = http.Get("http://" + lis.Addr().String() + "/healthz")
	require.Error(t, err, "the server is shut down")
}
