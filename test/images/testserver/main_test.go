package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestHandler(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		target     string
		wantStatus int
		wantBody   string
	}{
		{"root answers the host name", http.MethodGet, "/", http.StatusOK, "pod-a\n"},
		{"healthz", http.MethodGet, "/healthz", http.StatusOK, "ok\n"},
		{"echo", http.MethodGet, "/echo?msg=hello%20world", http.StatusOK, "hello world"},
		{"echo without msg", http.MethodGet, "/echo", http.StatusOK, ""},
		{"unknown path", http.MethodGet, "/missing", http.StatusNotFound, "404 page not found\n"},
		{"wrong method", http.MethodPost, "/", http.StatusMethodNotAllowed, "Method Not Allowed\n"},
	}
	h := newHandler("pod-a")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
			require.Equal(t, tt.wantStatus, rec.Code)
			require.Equal(t, tt.wantBody, rec.Body.String())
		})
	}
}

func TestSubcommand(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		wantCmd  string
		wantArgs []string
	}{
		{"invoked as /pause", []string{"/pause"}, "pause", nil},
		{"invoked as pause with arguments", []string{"pause", "serve"}, "pause", nil},
		{"serve", []string{"/testserver", "serve", "--port", "80"}, "serve", []string{"--port", "80"}},
		{"pause subcommand", []string{"/testserver", "pause"}, "pause", []string{}},
		{"no subcommand", []string{"/testserver"}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, args := subcommand(tt.argv)
			require.Equal(t, tt.wantCmd, cmd)
			require.Equal(t, tt.wantArgs, args)
		})
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name    string
		cmd     string
		args    []string
		wantErr string
	}{
		{"no subcommand", "", nil, "usage: testserver"},
		{"unknown subcommand", "bogus", nil, "usage: testserver"},
		{"bad port", "serve", []string{"--port", "eighty"}, "invalid value"},
		{"port out of range", "serve", []string{"--port", "70000"}, "listen on :70000"},
		{"cri-pods unknown flag", "cri-pods", []string{"--bogus"}, "flag provided but not defined"},
		{"cri-pods without runtime", "cri-pods", []string{"--socket", filepath.Join(t.TempDir(), "none.sock")}, "connect to CRI runtime"},
		{"sleep without duration", "sleep", nil, "sleep: want exactly one duration"},
		{"sleep bad duration", "sleep", []string{"five"}, "sleep: time: invalid duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), tt.cmd, tt.args, &out)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestSleep(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), "sleep", []string{"1ms"}, &out))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, run(ctx, "sleep", []string{"1h"}, &out), "a stopped sleep returns at once")
}

func TestEnv(t *testing.T) {
	t.Setenv("TESTSERVER_TEST_ENV", "bar")
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), "env", []string{"TESTSERVER_TEST_ENV"}, &out))
	require.Equal(t, "bar\n", out.String())
	require.ErrorContains(t, run(t.Context(), "env", []string{"TESTSERVER_UNSET"}, &out), "not set")
	require.Error(t, run(t.Context(), "env", nil, &out))
}

func TestPause(t *testing.T) {
	tests := []struct {
		name        string
		reapZombies bool
	}{
		{"returns when terminated", false},
		{"reaps exited children", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- pause(ctx, tt.reapZombies) }()
			if tt.reapZombies {
				p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", "exit 0"}, &os.ProcAttr{})
				require.NoError(t, err)
				// Once reaped, the process is gone: signal 0 fails with ESRCH.
				require.Eventually(t, func() bool {
					return syscall.Kill(p.Pid, 0) == syscall.ESRCH
				}, 10*time.Second, 10*time.Millisecond)
				require.NoError(t, p.Release())
			}
			cancel()
			require.NoError(t, <-done)
		})
	}
}

// fakeRuntime is a CRI runtime service that knows a fixed list of pods.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	pods []*runtimeapi.PodSandbox
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: f.pods}, nil
}

// startFakeRuntime serves a fakeRuntime on a unix socket until the test ends
// and returns the socket's path.
func startFakeRuntime(t *testing.T, pods []*runtimeapi.PodSandbox) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", socket)
	require.NoError(t, err)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, &fakeRuntime{pods: pods})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return socket
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSuffix(b.buf.String(), "\n"), "\n")
}

func TestCRIPods(t *testing.T) {
	pods := []*runtimeapi.PodSandbox{
		{Id: "1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "web-0", Namespace: "default", Uid: "uid-1"}, State: runtimeapi.PodSandboxState_SANDBOX_READY},
		{Id: "2", Metadata: &runtimeapi.PodSandboxMetadata{Name: "old", Namespace: "kube-system", Uid: "uid-2"}, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
	}
	want := []podLine{
		{Name: "web-0", Namespace: "default", UID: "uid-1", State: "SANDBOX_READY"},
		{Name: "old", Namespace: "kube-system", UID: "uid-2", State: "SANDBOX_NOTREADY"},
	}
	socket := startFakeRuntime(t, pods)

	tests := []struct {
		name     string
		interval time.Duration
		rounds   int
	}{
		{"once", 0, 1},
		{"watch", time.Millisecond, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out syncBuffer
			done := make(chan error, 1)
			go func() { done <- criPods(ctx, socket, tt.interval, &out) }()
			if tt.interval > 0 {
				require.Eventually(t, func() bool {
					return len(out.lines()) >= tt.rounds*len(want)
				}, 10*time.Second, 10*time.Millisecond)
				cancel()
			}
			require.NoError(t, <-done)

			lines := out.lines()
			require.GreaterOrEqual(t, len(lines), tt.rounds*len(want))
			for i, line := range lines[:tt.rounds*len(want)] {
				var got podLine
				require.NoError(t, json.Unmarshal([]byte(line), &got))
				require.Equal(t, want[i%len(want)], got)
			}
		})
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(newHandler("pod-b"))
	t.Cleanup(srv.Close)
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"body of a 200", []string{srv.URL + "/"}, "pod-b\n", ""},
		{"non-2xx is an error", []string{srv.URL + "/missing"}, "", "404"},
		{"needs one URL", nil, "", "exactly one URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := run(t.Context(), "get", tt.args, &out)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, out.String())
		})
	}
}

// TestServeReusePort runs two servers on one port, as a SidecarSet
// hot-upgrade pair does, and shows that the port keeps answering while
// the first stops.
func TestServeReusePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	start := func() (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, addr, true) }()
		return cancel, done
	}
	get := func() error {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	stop1, done1 := start()
	require.Eventually(t, func() bool { return get() == nil }, 5*time.Second, 10*time.Millisecond)
	stop2, done2 := start()
	stop1()
	require.NoError(t, <-done1)
	require.NoError(t, get(), "the second server answers once the first stopped")
	stop2()
	require.NoError(t, <-done2)
}

// TestPoll counts answered and failed requests until stopped.
func TestPoll(t *testing.T) {
	ok := httptest.NewServer(newHandler("h"))
	defer ok.Close()
	for _, tc := range []struct {
		name       string
		url        string
		wantFailed bool
	}{
		{"answered", ok.URL + "/healthz", false},
		{"refused", "http://127.0.0.1:1/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			var out syncBuffer
			done := make(chan error, 1)
			go func() { done <- poll(ctx, tc.url, time.Millisecond, time.Second, 10*time.Millisecond, &out) }()
			require.Eventually(t, func() bool { return len(out.lines()) >= 2 }, 5*time.Second, 5*time.Millisecond)
			cancel()
			require.NoError(t, <-done)
			lines := out.lines()
			var last pollCounts
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
			if tc.wantFailed {
				require.Positive(t, last.Failed)
				require.Zero(t, last.OK)
				require.NotEmpty(t, last.LastError)
			} else {
				require.Positive(t, last.OK)
				require.Zero(t, last.Failed)
			}
		})
	}
}
