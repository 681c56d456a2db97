//go:build bench && linux

package nodeworkbench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"

	"github.com/shoal-io/shoal/coordinator/auth"
	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// runCoordinator is the child process: a dispatch.Server on 127.0.0.1:0
// with TLS and a control endpoint for the benchmark. It runs until its
// stdin closes (the parent is gone), SIGTERM, or its lifetime cap.
func runCoordinator() int {
	if err := coordinatorMain(); err != nil {
		fmt.Fprintf(os.Stderr, "bench coordinator: %v\n", err)
		return 1
	}
	return 0
}

func coordinatorMain() error {
	if _, err := raiseFDLimit(); err != nil {
		return err
	}
	lifetime := 30 * time.Minute
	if v := os.Getenv(lifetimeEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s=%q: %w", lifetimeEnv, v, err)
		}
		lifetime = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), lifetime)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		// The parent holds the write end of our stdin; EOF means it is gone.
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	dir := os.Getenv(pkiDirEnv)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, certFileName), filepath.Join(dir, keyFileName))
	if err != nil {
		return fmt.Errorf("load serving certificate: %w", err)
	}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})

	c := newBenchCoordinator()
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for node-work gRPC: %w", err)
	}
	ctlLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for control: %w", err)
	}
	mux := c.mux()
	if os.Getenv(modeEnv) == modeImagePull {
		nodes, err := strconv.Atoi(os.Getenv(modeNodesEnv))
		if err != nil || nodes < 1 {
			return fmt.Errorf("%s=%q: want a positive number of nodes", modeNodesEnv, os.Getenv(modeNodesEnv))
		}
		pb, err := startPullBench(ctx, c, nodes)
		if err != nil {
			return err
		}
		pb.routes(mux)
	}
	if os.Getenv(modeEnv) == modeProbes {
		pb, err := startProbeBench(ctx, c)
		if err != nil {
			return err
		}
		pb.routes(c, mux)
	}
	ctl := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 2)
	go func() { errc <- c.srv.Serve(ctx, grpcLis, creds) }()
	go func() {
		if err := ctl.Serve(ctlLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("serve control: %w", err)
		}
	}()
	fmt.Printf("%s %s %s\n", readyPrefix, grpcLis.Addr(), ctlLis.Addr())

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer shutCancel()
	_ = ctl.Shutdown(shutCtx)
	return err
}

// benchCoordinator is the coordinator's store and server plus the round
// bookkeeping the control endpoint reports.
type benchCoordinator struct {
	store *dispatch.Store
	srv   *dispatch.Server
	reg   *prometheus.Registry

	mu    sync.Mutex
	round *round
}

// round is one delivery measurement: one item id put on every node.
type round struct {
	id    string
	start time.Time
	nodes []string
	ack   map[string]time.Duration
	run   map[string]time.Duration
	done  map[string]time.Duration
}

func newBenchCoordinator() *benchCoordinator {
	c := &benchCoordinator{store: dispatch.NewStore(), reg: prometheus.NewRegistry()}
	c.store.HandleReports(nodework.KindNoop, c.onReport)
	c.srv = dispatch.NewServer(dispatch.ServerOptions{Store: c.store, Auth: tokenAuth{}, Name: "bench-coordinator", Registerer: c.reg})
	return c
}

// tokenAuth maps token "node-i" to node "node-i".
type tokenAuth struct{}

// Authenticate implements dispatch.Authenticator.
func (tokenAuth) Authenticate(_ context.Context, token string) (auth.Identity, error) {
	if !strings.HasPrefix(token, "node-") {
		return auth.Identity{}, fmt.Errorf("%w: not a benchmark token", auth.ErrUnauthenticated)
	}
	return auth.Identity{Username: "system:serviceaccount:shoal-system:shoal-agent", NodeName: token, PodName: "shoal-agent-" + token}, nil
}

// onReport records the arrival of a round's first reports per node.
func (c *benchCoordinator) onReport(node string, _ *nodeworkv1.WorkItem, r *nodeworkv1.WorkReport) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	rd := c.round
	if rd == nil || r.GetId() != rd.id {
		return
	}
	since := now.Sub(rd.start)
	first := func(m map[string]time.Duration) {
		if _, ok := m[node]; !ok {
			m[node] = since
		}
	}
	first(rd.ack)
	switch r.GetPhase() {
	case nodeworkv1.Phase_PHASE_RUNNING:
		first(rd.run)
	case nodeworkv1.Phase_PHASE_SUCCEEDED:
		first(rd.run)
		first(rd.done)
	}
}

func (c *benchCoordinator) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mem", func(w http.ResponseWriter, _ *http.Request) {
		m, err := sampleMemory()
		reply(w, m, err)
	})
	mux.HandleFunc("GET /agents", c.handleAgents)
	mux.HandleFunc("POST /put", c.handlePut)
	mux.HandleFunc("GET /round", c.handleRound)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	return mux
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// waitParams reads ?want=N&timeout=D.
func waitParams(r *http.Request) (int, time.Duration, error) {
	want, timeout := 0, time.Duration(0)
	var err error
	if v := r.URL.Query().Get("want"); v != "" {
		if want, err = strconv.Atoi(v); err != nil {
			return 0, 0, fmt.Errorf("want=%q: %w", v, err)
		}
	}
	if v := r.URL.Query().Get("timeout"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil {
			return 0, 0, fmt.Errorf("timeout=%q: %w", v, err)
		}
	}
	return want, timeout, nil
}

// poll calls done every 5 ms until it returns true, timeout passes or ctx
// ends.
func poll(ctx context.Context, timeout time.Duration, done func() bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// handleAgents answers the connected count, after waiting (bounded) until
// it reaches ?want.
func (c *benchCoordinator) handleAgents(w http.ResponseWriter, r *http.Request) {
	want, timeout, err := waitParams(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	poll(r.Context(), timeout, func() bool { return len(c.srv.Agents()) >= want })
	out := agentsReply{Connected: len(c.srv.Agents())}
	mfs, err := c.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "shoal_coordinator_agent_connects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n := int(m.GetCounter().GetValue())
			for _, l := range m.GetLabel() {
				if l.GetName() != "result" {
					continue
				}
				if l.GetValue() == "accepted" {
					out.Accepted += n
				} else {
					out.Refused += n
				}
			}
		}
	}
	reply(w, out, err)
}

// handlePut starts a round: one noop item ?id on every connected node.
func (c *benchCoordinator) handlePut(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	agents := c.srv.Agents()
	rd := &round{id: id, nodes: make([]string, 0, len(agents)),
		ack: map[string]time.Duration{}, run: map[string]time.Duration{}, done: map[string]time.Duration{}}
	for _, a := range agents {
		rd.nodes = append(rd.nodes, a.Node)
	}
	c.mu.Lock()
	c.round = rd
	rd.start = time.Now()
	c.mu.Unlock()
	for _, node := range rd.nodes {
		c.store.Put(node, &nodeworkv1.WorkItem{Id: id, Kind: nodework.KindNoop,
			Spec: &nodeworkv1.WorkItem_Noop{Noop: &nodeworkv1.NoopSpec{Steps: 1}}})
	}
	reply(w, putReply{Nodes: len(rd.nodes), PutNanos: int64(time.Since(rd.start))}, nil)
}

// handleRound waits (bounded) until every node of the round ?id reported
// SUCCEEDED, then answers the arrival times.
func (c *benchCoordinator) handleRound(w http.ResponseWriter, r *http.Request) {
	_, timeout, err := waitParams(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.URL.Query().Get("id")
	c.mu.Lock()
	rd := c.round
	c.mu.Unlock()
	if rd == nil || rd.id != id {
		http.Error(w, fmt.Sprintf("round %q is not the current round", id), http.StatusNotFound)
		return
	}
	poll(r.Context(), timeout, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(rd.done) >= len(rd.nodes) && len(rd.run) >= len(rd.nodes)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	out := roundReply{Nodes: len(rd.nodes)}
	for _, node := range rd.nodes {
		if d, ok := rd.ack[node]; ok {
			out.AckNanos = append(out.AckNanos, int64(d))
		}
		if d, ok := rd.done[node]; ok {
			out.DoneNanos = append(out.DoneNanos, int64(d))
		}
		d, ok := rd.run[node]
		if !ok {
			out.Missing = append(out.Missing, node)
			continue
		}
		out.StartNanos = append(out.StartNanos, int64(d))
	}
	reply(w, out, nil)
}
