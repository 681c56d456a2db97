package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2/ktesting"

	"github.com/shoal-io/shoal/agent/link"
	"github.com/shoal-io/shoal/agent/state"
	"github.com/shoal-io/shoal/agent/work"
	"github.com/shoal-io/shoal/coordinator/auth"
	"github.com/shoal-io/shoal/coordinator/dispatch"
	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/peertls/peertlstest"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// tokens maps a token to the node it is bound to.
type tokens map[string]string

func (t tokens) Authenticate(_ context.Context, token string) (auth.Identity, error) {
	node, ok := t[token]
	if !ok {
		return auth.Identity{}, errors.Join(auth.ErrUnauthenticated, errors.New("unknown token"))
	}
	return auth.Identity{NodeName: node, PodName: "agent-" + node}, nil
}

// readers maps a client token to its user, who may get /inventory only.
type readers map[string]string

func (r readers) Review(_ context.Context, token, verb, path string) (auth.AccessDecision, error) {
	user, ok := r[token]
	switch {
	case !ok:
		return auth.AccessDecision{Reason: "invalid bearer token"}, nil
	case verb == "get" && path == "/inventory":
		return auth.AccessDecision{Authenticated: true, Allowed: true, User: user}, nil
	}
	return auth.AccessDecision{Authenticated: true, User: user, Reason: "no grant"}, nil
}

type harness struct {
	t      *testing.T
	store  *dispatch.Store
	server *dispatch.Server
	addr   string
	stop   func()
}

// startServer serves a store on a loopback port until the test ends or
// stop is called.
func startServer(t *testing.T, store *dispatch.Store, leader func() bool) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	srv := dispatch.NewServer(dispatch.ServerOptions{
		Store: store, Auth: tokens{"t1": "node-1", "t2": "node-2"}, IsLeader: leader, Name: "test", HelloTimeout: 2 * time.Second,
		Access: readers{"reader-token": "ops:reader"}, PeerSigner: newCASigner(t),
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, nil) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return &harness{t: t, store: store, server: srv, addr: lis.Addr().String(), stop: stop}
}

type agent struct {
	runner *work.Runner
	link   *link.Link
	peers  chan []*nodeworkv1.Peer
	stop   func()
}

// startAgent runs a runner over dir and a link to addr as node.
func startAgent(t *testing.T, addr, node, token, dir string) *agent {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	st, err := state.Open(dir)
	require.NoError(t, err)
	a := &agent{peers: make(chan []*nodeworkv1.Peer, 10)}
	a.runner = work.New(st, map[string]work.Handler{nodework.KindNoop: work.Noop{}}, ktesting.NewLogger(t, ktesting.NewConfig()))
	a.link = link.New(link.Config{
		Address: addr, Insecure: true, Token: token, Runner: a.runner,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Hello: func() *nodeworkv1.Hello {
			return &nodeworkv1.Hello{NodeName: node, MeshAddress: "127.0.0.1:7946", Capabilities: &nodeworkv1.Capabilities{WorkKinds: a.runner.Kinds()}}
		},
		OnPeers: func(p []*nodeworkv1.Peer) { a.peers <- p },
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = a.runner.Run(ctx) }()
	go func() { defer wg.Done(); _ = a.link.Run(ctx) }()
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			require.NoError(t, st.Close())
		})
	}
	t.Cleanup(a.stop)
	return a
}

func noop(id string, steps, millis uint32) *nodeworkv1.WorkItem {
	return &nodeworkv1.WorkItem{Id: id, Kind: nodework.KindNoop, Spec: &nodeworkv1.WorkItem_Noop{Noop: &nodeworkv1.NoopSpec{Steps: steps, StepMillis: millis}}}
}

// waitReport polls the store until node's report on id satisfies ok.
func waitReport(t *testing.T, store *dispatch.Store, node, id string, ok func(*nodeworkv1.WorkReport) bool) *nodeworkv1.WorkReport {
	t.Helper()
	var last *nodeworkv1.WorkReport
	require.Eventually(t, func() bool {
		_, last = store.Item(node, id)
		return last != nil && ok(last)
	}, 10*time.Second, 5*time.Millisecond, "report of %s on %s: last %v", id, node, last)
	return last
}

func phase(p nodeworkv1.Phase) func(*nodeworkv1.WorkReport) bool {
	return func(r *nodeworkv1.WorkReport) bool { return r.GetPhase() == p }
}

func TestWorkFlowsBothWays(t *testing.T) {
	store := dispatch.NewStore()
	h := startServer(t, store, nil)
	store.Put("node-1", noop("a", 3, 1))
	a := startAgent(t, h.addr, "node-1", "t1", t.TempDir())

	r := waitReport(t, store, "node-1", "a", phase(nodeworkv1.Phase_PHASE_SUCCEEDED))
	require.EqualValues(t, 3, r.GetNoop().GetStepsDone())
	require.EqualValues(t, 1, r.GetNoop().GetStarts())
	require.EqualValues(t, 1, r.GetObservedGeneration())

	// Added while connected: an upsert.
	store.Put("node-1", noop("b", 1, 0))
	waitReport(t, store, "node-1", "b", phase(nodeworkv1.Phase_PHASE_SUCCEEDED))

	// A new spec is a new generation and runs again from scratch.
	store.Put("node-1", noop("b", 2, 0))
	r = waitReport(t, store, "node-1", "b", func(r *nodeworkv1.WorkReport) bool {
		return r.GetObservedGeneration() == 2 && r.GetPhase() == nodeworkv1.Phase_PHASE_SUCCEEDED
	})
	require.EqualValues(t, 2, r.GetNoop().GetStepsDone())

	// A kind from the future is reported as unsupported, not a crash.
	store.Put("node-1", &nodeworkv1.WorkItem{Id: "future", Kind: "teleport"})
	r = waitReport(t, store, "node-1", "future", phase(nodeworkv1.Phase_PHASE_UNSUPPORTED))
	require.Contains(t, r.GetMessage(), `kind "teleport"`)

	// Removal reaches the agent.
	store.Delete("node-1", "a")
	require.Eventually(t, func() bool { _, ok := a.runner.Report("a"); return !ok }, 10*time.Second, 5*time.Millisecond)
	require.Len(t, h.server.Agents(), 1)
}

func TestReconnectResyncsEverything(t *testing.T) {
	store := dispatch.NewStore()
	h := startServer(t, store, nil)
	store.Put("node-1", noop("a", 1, 0))
	startAgent(t, h.addr, "node-1", "t1", t.TempDir())
	waitReport(t, store, "node-1", "a", phase(nodeworkv1.Phase_PHASE_SUCCEEDED))
	h.stop()

	// A new coordinator knows the work but not its state: the agent's full
	// re-report after reconnecting tells it, without re-running the item.
	fresh := dispatch.NewStore()
	fresh.Put("node-1", noop("a", 1, 0))
	// While away, the work for node-1 changed: b is new.
	fresh.Put("node-1", noop("b", 1, 0))
	// The agent dials the same address; the new server listens there.
	h3 := restartOn(t, fresh, h.addr)
	r := waitReport(t, fresh, "node-1", "a", phase(nodeworkv1.Phase_PHASE_SUCCEEDED))
	require.EqualValues(t, 1, r.GetNoop().GetStarts(), "a finished item must not run again")
	waitReport(t, fresh, "node-1", "b", phase(nodeworkv1.Phase_PHASE_SUCCEEDED))
	require.Len(t, h3.server.Agents(), 1)
}

// restartOn serves store on addr (a port a stopped server left free).
func restartOn(t *testing.T, store *dispatch.Store, addr string) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	srv := dispatch.NewServer(dispatch.ServerOptions{Store: store, Auth: tokens{"t1": "node-1", "t2": "node-2"}, Name: "again"})
	var lis net.Listener
	require.Eventually(t, func() bool {
		var err error
		lis, err = net.Listen("tcp", addr)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, nil) }()
	t.Cleanup(func() { cancel(); <-done })
	return &harness{t: t, store: store, server: srv, addr: addr}
}

func TestAgentRestartResumes(t *testing.T) {
	store := dispatch.NewStore()
	h := startServer(t, store, nil)
	dir := t.TempDir()
	store.Put("node-1", noop("slow", 50, 20))
	a := startAgent(t, h.addr, "node-1", "t1", dir)
	r := waitReport(t, store, "node-1", "slow", func(r *nodeworkv1.WorkReport) bool { return r.GetNoop().GetStepsDone() >= 5 })
	a.stop()
	before, _ := a.runner.Report("slow")
	require.GreaterOrEqual(t, before.GetNoop().GetStepsDone(), r.GetNoop().GetStepsDone())

	// Same state dir, new process-equivalent: resumes, never restarts.
	startAgent(t, h.addr, "node-1", "t1", dir)
	r = waitReport(t, store, "node-1", "slow", phase(nodeworkv1.Phase_PHASE_SUCCEEDED))
	require.EqualValues(t, 50, r.GetNoop().GetStepsDone())
	require.EqualValues(t, 2, r.GetNoop().GetStarts())
}

func TestWorkGoesOnWithoutCoordinator(t *testing.T) {
	store := dispatch.NewStore()
	h := startServer(t, store, nil)
	store.Put("node-1", noop("w", 40, 10))
	a := startAgent(t, h.addr, "node-1", "t1", t.TempDir())
	waitReport(t, store, "node-1", "w", phase(nodeworkv1.Phase_PHASE_RUNNING))
	h.stop()
	require.Eventually(t, func() bool { return !a.link.Connected() }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		r, _ := a.runner.Report("w")
		return r.GetPhase() == nodeworkv1.Phase_PHASE_SUCCEEDED
	}, 10*time.Second, 5*time.Millisecond, "the agent finishes accepted work with the coordinator away")
	_, atCoordinator := store.Item("node-1", "w")
	require.NotEqual(t, nodeworkv1.Phase_PHASE_SUCCEEDED, atCoordinator.GetPhase(), "nobody could have told the coordinator")
}

func TestPeersAndReplacement(t *testing.T) {
	store := dispatch.NewStore()
	h := startServer(t, store, nil)
	a1 := startAgent(t, h.addr, "node-1", "t1", t.TempDir())
	require.Empty(t, <-a1.peers)
	a2 := startAgent(t, h.addr, "node-2", "t2", t.TempDir())
	peers := <-a2.peers
	require.Len(t, peers, 1)
	require.Equal(t, "node-1", peers[0].GetNodeName())

	// A second stream for node-1 (same token) replaces the first.
	conn, stream := rawStream(t, h.addr, "t1")
	defer func() { _ = conn.Close() }()
	require.NoError(t, stream.Send(helloMsg(1, "node-1")))
	m, err := stream.Recv()
	require.NoError(t, err)
	require.NotNil(t, m.GetWelcome())
	require.Len(t, h.server.Agents(), 2)
}

func helloMsg(seq uint64, node string) *nodeworkv1.AgentMessage {
	return &nodeworkv1.AgentMessage{Seq: seq, Body: &nodeworkv1.AgentMessage_Hello{Hello: &nodeworkv1.Hello{ProtocolVersion: nodework.ProtocolVersion, NodeName: node}}}
}

func rawStream(t *testing.T, addr, token string) (*grpc.ClientConn, nodeworkv1.NodeWork_ConnectClient) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	ctx := t.Context()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	stream, err := nodeworkv1.NewNodeWorkClient(conn).Connect(ctx)
	require.NoError(t, err)
	return conn, stream
}

// TestRefusals: bad tokens, node mismatch, protocol violations and a
// follower all end the stream with a clear code, and the server keeps
// serving.
func TestRefusals(t *testing.T) {
	leader := true
	var mu sync.Mutex
	store := dispatch.NewStore()
	h := startServer(t, store, func() bool { mu.Lock(); defer mu.Unlock(); return leader })
	report := func(seq uint64) *nodeworkv1.AgentMessage {
		return &nodeworkv1.AgentMessage{Seq: seq, Body: &nodeworkv1.AgentMessage_Report{Report: &nodeworkv1.WorkReport{Id: "x", Kind: "noop", Phase: nodeworkv1.Phase_PHASE_RUNNING}}}
	}
	for _, tc := range []struct {
		name  string
		token string
		msgs  []*nodeworkv1.AgentMessage
		code  codes.Code
		msg   string
	}{
		{"no token", "", []*nodeworkv1.AgentMessage{helloMsg(1, "node-1")}, codes.Unauthenticated, "authorization"},
		{"unknown token", "nope", []*nodeworkv1.AgentMessage{helloMsg(1, "node-1")}, codes.Unauthenticated, "unknown token"},
		{"another node's token", "t2", []*nodeworkv1.AgentMessage{helloMsg(1, "node-1")}, codes.PermissionDenied, "node-1"},
		{"report before hello", "t1", []*nodeworkv1.AgentMessage{report(1)}, codes.InvalidArgument, "before the hello"},
		{"empty node name", "t1", []*nodeworkv1.AgentMessage{helloMsg(1, "")}, codes.InvalidArgument, "hello.nodeName"},
		{"seq gap", "t1", []*nodeworkv1.AgentMessage{helloMsg(1, "node-1"), report(5)}, codes.InvalidArgument, "out of order"},
		{"second hello", "t1", []*nodeworkv1.AgentMessage{helloMsg(1, "node-1"), helloMsg(2, "node-1")}, codes.InvalidArgument, "second hello"},
		{"bad phase", "t1", []*nodeworkv1.AgentMessage{helloMsg(1, "node-1"), {Seq: 2, Body: &nodeworkv1.AgentMessage_Report{Report: &nodeworkv1.WorkReport{Id: "x", Phase: 42}}}}, codes.InvalidArgument, "report.phase"},
		{"oversized", "t1", []*nodeworkv1.AgentMessage{helloMsg(1, "node-1"), {Seq: 2, Body: &nodeworkv1.AgentMessage_Report{Report: &nodeworkv1.WorkReport{Id: "x", Phase: 1, Message: string(make([]byte, nodework.MaxMessageBytes+10))}}}}, codes.ResourceExhausted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, stream := rawStream(t, h.addr, tc.token)
			defer func() { _ = conn.Close() }()
			for _, m := range tc.msgs {
				if err := stream.Send(m); err != nil {
					break
				}
			}
			var err error
			for err == nil {
				_, err = stream.Recv()
			}
			st, _ := status.FromError(err)
			require.Equal(t, tc.code, st.Code(), "got %v", err)
			require.Contains(t, st.Message(), tc.msg)
		})
	}

	t.Run("follower", func(t *testing.T) {
		mu.Lock()
		leader = false
		mu.Unlock()
		conn, stream := rawStream(t, h.addr, "t1")
		defer func() { _ = conn.Close() }()
		_ = stream.Send(helloMsg(1, "node-1"))
		_, err := stream.Recv()
		require.Equal(t, codes.Unavailable, status.Code(err))
		mu.Lock()
		leader = true
		mu.Unlock()
	})

	// After all that, a good agent still gets served.
	store.Put("node-1", noop("ok", 1, 0))
	startAgent(t, h.addr, "node-1", "t1", t.TempDir())
	waitReport(t, store, "node-1", "ok", phase(nodeworkv1.Phase_PHASE_SUCCEEDED))
}

// slowTokens is tokens whose Authenticate tells started and then waits
// for release: an apiserver that is slow to answer a TokenReview.
type slowTokens struct {
	tokens
	started, release chan struct{}
}

func (s slowTokens) Authenticate(ctx context.Context, token string) (auth.Identity, error) {
	close(s.started)
	<-s.release
	return s.tokens.Authenticate(ctx, token)
}

// TestLeaseLostDuringSetup: a stream that passed the leader check, then
// waited on authentication while the replica lost its lease (and
// Disconnect ended the sessions it had), is refused, not kept: otherwise
// the agent's reports would go to a standby for good.
func TestLeaseLostDuringSetup(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	leader := true
	isLeader := func() bool { mu.Lock(); defer mu.Unlock(); return leader }
	slow := slowTokens{tokens: tokens{"t1": "node-1"}, started: make(chan struct{}), release: make(chan struct{})}
	srv := dispatch.NewServer(dispatch.ServerOptions{Store: dispatch.NewStore(), Auth: slow, IsLeader: isLeader, Name: "test", HelloTimeout: 5 * time.Second})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, nil) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	conn, stream := rawStream(t, lis.Addr().String(), "t1")
	defer func() { _ = conn.Close() }()
	require.NoError(t, stream.Send(helloMsg(1, "node-1")))
	<-slow.started // past the leader check, authenticating

	mu.Lock()
	leader = false
	mu.Unlock()
	srv.Disconnect(dispatch.ErrNotLeader) // what stepping down does
	close(slow.release)

	ended := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			_, err = stream.Recv()
		}
		ended <- err
	}()
	var recvErr error
	select {
	case recvErr = <-ended:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "a replica that lost its lease kept the stream")
	}
	require.Equal(t, codes.Unavailable, status.Code(recvErr), "got %v", recvErr)
	require.Contains(t, status.Convert(recvErr).Message(), "no longer the leader")
}

// TestReviewAccess: an agent's endpoint reviews reach the coordinator over
// its connection; nobody else may ask; without a connection the agent
// knows it has no answer.
func TestReviewAccess(t *testing.T) {
	store := dispatch.NewStore()
	h := startServer(t, store, nil)
	a := startAgent(t, h.addr, "node-1", "t1", t.TempDir())
	require.Eventually(t, a.link.Connected, 10*time.Second, 5*time.Millisecond)

	ctx := t.Context()
	r, err := a.link.ReviewAccess(ctx, "reader-token", "get", "/inventory")
	require.NoError(t, err)
	require.True(t, r.GetAllowed())
	require.Equal(t, "ops:reader", r.GetUser())
	r, err = a.link.ReviewAccess(ctx, "reader-token", "get", "/mesh")
	require.NoError(t, err)
	require.False(t, r.GetAllowed())
	require.True(t, r.GetAuthenticated())
	r, err = a.link.ReviewAccess(ctx, "forged", "get", "/inventory")
	require.NoError(t, err)
	require.False(t, r.GetAuthenticated())
	require.Equal(t, "invalid bearer token", r.GetReason())

	// Only agents may use the coordinator to check tokens.
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	for _, own := range []string{"", "reader-token"} {
		callCtx := ctx
		if own != "" {
			callCtx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+own)
		}
		_, err = nodeworkv1.NewNodeWorkClient(conn).ReviewAccess(callCtx, &nodeworkv1.AccessReviewRequest{Token: "reader-token", Verb: "get", Path: "/inventory"})
		require.Equal(t, codes.Unauthenticated, status.Code(err), "caller token %q: %v", own, err)
	}

	h.stop()
	require.Eventually(t, func() bool { return !a.link.Connected() }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := a.link.ReviewAccess(ctx, "reader-token", "get", "/inventory")
		return errors.Is(err, link.ErrNotConnected)
	}, 10*time.Second, 5*time.Millisecond)
}

// caSigner signs peer certificates with a throwaway CA, as
// certs.PeerSigner does with the coordinator's.
type caSigner struct{ ca *peertlstest.CA }

func newCASigner(t *testing.T) caSigner {
	t.Helper()
	ca, err := peertlstest.NewCA("dispatch-test")
	require.NoError(t, err)
	return caSigner{ca}
}

func (s caSigner) SignPeer(_ context.Context, csr []byte, node string) ([]byte, []byte, error) {
	chain, err := peertls.Sign(peertls.SignRequest{CSR: csr, Node: node, CACert: s.ca.Cert, CAKey: s.ca.Key})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", dispatch.ErrBadCertificateRequest, err)
	}
	return chain, s.ca.BundlePEM, nil
}

func TestIssuePeerCertificate(t *testing.T) {
	store := dispatch.NewStore()
	h := startServer(t, store, nil)
	a := startAgent(t, h.addr, "node-1", "t1", t.TempDir())
	require.Eventually(t, a.link.Connected, 10*time.Second, 5*time.Millisecond)
	ctx := t.Context()
	id, err := peertls.NewIdentity(peertls.Options{Node: "node-1"})
	require.NoError(t, err)

	csr, err := id.NewRequest()
	require.NoError(t, err)
	chain, bundle, err := a.link.IssuePeerCertificate(ctx, "node-1", csr)
	require.NoError(t, err)
	require.NoError(t, id.Install(chain, bundle))
	require.Equal(t, "node-1", id.Leaf().Subject.CommonName)

	// Another node's certificate, an unreadable request, a caller that is
	// no agent: refused.
	_, _, err = a.link.IssuePeerCertificate(ctx, "node-2", csr)
	require.Equal(t, codes.PermissionDenied, status.Code(errors.Unwrap(err)), "%v", err)
	_, _, err = a.link.IssuePeerCertificate(ctx, "node-1", []byte("not a CSR"))
	require.Equal(t, codes.InvalidArgument, status.Code(errors.Unwrap(err)), "%v", err)
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = nodeworkv1.NewNodeWorkClient(conn).IssuePeerCertificate(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer reader-token"),
		&nodeworkv1.PeerCertificateRequest{Csr: csr, NodeName: "node-1"})
	require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)

	h.stop()
	require.Eventually(t, func() bool {
		_, _, err := a.link.IssuePeerCertificate(ctx, "node-1", csr)
		return errors.Is(err, link.ErrNotConnected)
	}, 10*time.Second, 5*time.Millisecond)
}
