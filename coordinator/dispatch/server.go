package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/coordinator/auth"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Authenticator tells who holds a bearer token. *auth.Authenticator is the
// real one; tests and benchmarks pass simpler ones.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (auth.Identity, error)
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// Store is the work the server hands out. Required.
	Store *Store
	// Auth checks each agent's token. Required.
	Auth Authenticator
	// IsLeader reports whether this replica leads; followers refuse streams
	// so agents land on the leader. Nil means always.
	IsLeader func() bool
	// Name is this replica's name, sent in Welcome.
	Name string
	// HelloTimeout bounds the wait for an agent's Hello (default 10 s).
	HelloTimeout time.Duration
	// Access answers the agents' reviews of tokens presented to their
	// HTTP endpoints. Nil: ReviewAccess is unimplemented.
	Access AccessReviewer
	// PeerSigner signs the agents' peer certificates. Nil:
	// IssuePeerCertificate is unimplemented.
	PeerSigner PeerSigner
	// Registerer receives the server's metrics (nil: not registered).
	Registerer prometheus.Registerer
}

// PeerSigner signs an agent's peer certificate request for node (the node
// its token is bound to) and returns the certificate chain and the trust
// bundle, both PEM. *certs.PeerSigner is the real one.
type PeerSigner interface {
	SignPeer(ctx context.Context, csr []byte, node string) (chainPEM, bundlePEM []byte, err error)
}

// ErrBadCertificateRequest marks a PeerSigner error that is the request's
// fault (an unreadable or unsupported CSR), not the coordinator's.
var ErrBadCertificateRequest = errors.New("bad peer certificate request")

// AccessReviewer decides whether a client's bearer token may use an agent
// endpoint. *auth.AccessReviewer is the real one.
type AccessReviewer interface {
	Review(ctx context.Context, token, verb, path string) (auth.AccessDecision, error)
}

// Server serves the node-work stream. Each node has at most one live
// session; a newer stream from the same node replaces the older one.
type Server struct {
	nodeworkv1.UnimplementedNodeWorkServer

	opts    ServerOptions
	metrics *serverMetrics

	mu       sync.Mutex
	sessions map[string]*session
	seen     map[string]bool
	closing  bool // set on shutdown: no new sessions
}

// metricKind bounds the kind label to kinds this build knows.
func metricKind(kind string) string {
	if nodework.KnownKind(kind) {
		return kind
	}
	return "other"
}

// AgentInfo describes a connected agent.
type AgentInfo struct {
	// Node is the node the agent's token is bound to.
	Node string
	// Pod is the agent's pod.
	Pod string
	// MeshAddress is the agent's memberlist address.
	MeshAddress string
	// Capabilities are what the agent said in Hello.
	Capabilities *nodeworkv1.Capabilities
	// ConnectedAt is when the session started.
	ConnectedAt time.Time
}

type session struct {
	info   AgentInfo
	cancel context.CancelCauseFunc
}

// Causes that end a session from the server's side.
var (
	errReplaced = errors.New("replaced by a newer stream from the same node")
	errShutdown = errors.New("coordinator shutting down; reconnect to the new leader")
	// ErrNotLeader ends the sessions of a replica that lost the lease.
	ErrNotLeader = errors.New("this coordinator replica is no longer the leader; reconnect to the new leader")
)

// Disconnect ends every live session with cause (ErrNotLeader after a lost
// lease); the agents reconnect.
func (s *Server) Disconnect(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		ss.cancel(cause)
	}
}

// NewServer returns a server; register it on a grpc.Server or call Serve.
func NewServer(opts ServerOptions) *Server {
	if opts.HelloTimeout == 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	if opts.IsLeader == nil {
		opts.IsLeader = func() bool { return true }
	}
	s := &Server{opts: opts, sessions: map[string]*session{}, seen: map[string]bool{}}
	s.metrics = newServerMetrics(s)
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(s.metrics.collectors()...)
	}
	return s
}

// GRPCServerOptions are the transport settings both the coordinator and the
// benchmarks use: message size limit, keepalive, TLS.
func GRPCServerOptions(creds credentials.TransportCredentials) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(nodework.MaxMessageBytes),
		// Thousands of mostly idle streams: per-connection 32 KiB read and
		// write buffers would be most of the memory per agent
		// (test/bench/nodework measured 97 KiB per idle agent with them).
		// Writes borrow a buffer from a shared pool; reads need no buffer
		// of their own because TLS already buffers each record.
		grpc.SharedWriteBuffer(true),
		grpc.ReadBufferSize(0),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	return opts
}

// Serve serves the node-work API on lis until ctx ends, then stops
// gracefully (bounded by 5 s).
func (s *Server) Serve(ctx context.Context, lis net.Listener, creds credentials.TransportCredentials) error {
	gs := grpc.NewServer(GRPCServerOptions(creds)...)
	nodeworkv1.RegisterNodeWorkServer(gs, s)
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve node-work gRPC on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	// Streams live until their agent goes away: end them so the graceful
	// stop only waits for in-flight sends. Agents reconnect elsewhere.
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.Disconnect(errShutdown)
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		gs.Stop()
	}
	return nil
}

// Agents lists the connected agents sorted by node.
func (s *Server) Agents() []AgentInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]AgentInfo, 0, len(s.sessions))
	for _, ss := range s.sessions {
		out = append(out, ss.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Connect implements the node-work stream.
func (s *Server) Connect(stream nodeworkv1.NodeWork_ConnectServer) error {
	ctx := stream.Context()
	log := klog.FromContext(ctx).WithName("nodework")
	if p, ok := peer.FromContext(ctx); ok {
		log = log.WithValues("peer", p.Addr.String())
	}
	if !s.opts.IsLeader() {
		s.metrics.refused("not_leader")
		return status.Error(codes.Unavailable, "this coordinator replica is not the leader; reconnect through the shoal-coordinator Service")
	}

	authCtx, cancelAuth := context.WithTimeout(ctx, s.opts.HelloTimeout)
	id, err := s.authenticate(authCtx)
	cancelAuth()
	if err != nil {
		s.metrics.refused(authRefusal(err))
		log.Info("Refused agent stream", "reason", err.Error())
		return err
	}
	log = log.WithValues("node", id.NodeName, "pod", id.PodName)

	var seq nodework.Sequencer
	hello, err := s.awaitHello(ctx, stream, &seq)
	if err != nil {
		s.metrics.refused("protocol")
		log.Info("Refused agent stream", "reason", err.Error())
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if v := hello.GetProtocolVersion(); v < nodework.MinProtocolVersion {
		s.metrics.refused("protocol")
		log.Info("Refused agent stream", "reason", "protocol version too old", "version", v)
		return status.Errorf(codes.FailedPrecondition, "agent speaks node-work protocol %d; this coordinator needs at least %d: upgrade the agent", v, nodework.MinProtocolVersion)
	}
	if err := auth.CheckNode(id, hello.GetNodeName()); err != nil {
		s.metrics.refused("forbidden")
		log.Info("Refused agent stream", "reason", err.Error())
		return status.Error(codes.PermissionDenied, err.Error())
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	info := AgentInfo{Node: id.NodeName, Pod: id.PodName, MeshAddress: hello.GetMeshAddress(), Capabilities: hello.GetCapabilities(), ConnectedAt: time.Now()}
	me, peers, reconnect, err := s.register(info, cancel)
	if err != nil {
		if errors.Is(err, ErrNotLeader) {
			s.metrics.refused("not_leader")
			log.Info("Refused agent stream", "reason", "lost the lease while the stream was being set up")
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	defer s.unregister(me)
	s.metrics.accepted(reconnect)
	log.Info("Agent connected", "reconnect", reconnect, "held", len(hello.GetHeld()), "runtime", hello.GetCapabilities().GetRuntimeName(), "agentVersion", hello.GetCapabilities().GetAgentVersion())

	out := &sender{stream: stream}
	version := min(hello.GetProtocolVersion(), nodework.ProtocolVersion)
	if err := out.send(&nodeworkv1.CoordinatorMessage{Body: &nodeworkv1.CoordinatorMessage_Welcome{Welcome: &nodeworkv1.Welcome{
		ProtocolVersion: version, Coordinator: s.opts.Name, Peers: &nodeworkv1.Peers{Peers: peers},
	}}}); err != nil {
		return err
	}

	changed, stopWatch := s.opts.Store.Watch(id.NodeName)
	defer stopWatch()

	recvErr := make(chan error, 1)
	go func() { recvErr <- s.receive(ctx, stream, &seq, id.NodeName) }()

	sent := map[string]*nodeworkv1.WorkItem{}
	if err := out.sync(s.opts.Store.Items(id.NodeName), sent); err != nil {
		return err
	}
	for {
		select {
		case <-changed:
			if err := out.diff(s.opts.Store.Items(id.NodeName), sent); err != nil {
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, nodework.ErrProtocol) {
				s.metrics.protocolErrors.Inc()
				log.Info("Ending agent stream: protocol violation", "reason", err.Error())
				return status.Error(codes.InvalidArgument, err.Error())
			}
			log.V(2).Info("Agent stream ended", "err", err)
			return err
		case <-ctx.Done():
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errReplaced):
				log.Info("Agent stream replaced by a newer one")
				return status.Error(codes.Aborted, cause.Error())
			case errors.Is(cause, errShutdown), errors.Is(cause, ErrNotLeader):
				return status.Error(codes.Unavailable, cause.Error())
			}
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

func (s *Server) authenticate(ctx context.Context) (auth.Identity, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	token, err := auth.BearerFromMetadata(md)
	if err == nil {
		var id auth.Identity
		if id, err = s.opts.Auth.Authenticate(ctx, token); err == nil {
			return id, nil
		}
	}
	switch {
	case errors.Is(err, auth.ErrForbidden):
		return auth.Identity{}, status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, auth.ErrUnauthenticated):
		return auth.Identity{}, status.Error(codes.Unauthenticated, err.Error())
	default:
		// The token could not be checked (apiserver unreachable, timeout):
		// not the agent's fault; it retries.
		return auth.Identity{}, status.Error(codes.Unavailable, "cannot check the agent's token now: "+err.Error())
	}
}

// authRefusal is the metric label of an error of authenticate.
func authRefusal(err error) string {
	switch status.Code(err) {
	case codes.PermissionDenied:
		return "forbidden"
	case codes.Unauthenticated:
		return "unauthenticated"
	default:
		return "unavailable"
	}
}

// ReviewAccess implements the review of a token that a client presented
// to an agent's endpoint. Only agents may ask: the coordinator is not a
// token oracle for anyone else. Followers answer too; the review needs no
// lease.
func (s *Server) ReviewAccess(ctx context.Context, req *nodeworkv1.AccessReviewRequest) (*nodeworkv1.AccessReviewResponse, error) {
	if s.opts.Access == nil {
		return nil, status.Error(codes.Unimplemented, "this coordinator does not review agent endpoint access")
	}
	id, err := s.authenticate(ctx)
	if err != nil {
		s.metrics.reviewed(authRefusal(err))
		return nil, err
	}
	d, err := s.opts.Access.Review(ctx, req.GetToken(), req.GetVerb(), req.GetPath())
	if err != nil {
		s.metrics.reviewed("error")
		klog.FromContext(ctx).WithName("nodework").Info("Agent endpoint access review failed", "node", id.NodeName, "path", req.GetPath(), "err", err)
		return nil, status.Error(codes.Unavailable, "review the token: "+err.Error())
	}
	switch {
	case d.Allowed:
		s.metrics.reviewed("allowed")
	case d.Authenticated:
		s.metrics.reviewed("denied")
	default:
		s.metrics.reviewed("unauthenticated_client")
	}
	return &nodeworkv1.AccessReviewResponse{Authenticated: d.Authenticated, Allowed: d.Allowed, User: d.User, Reason: d.Reason}, nil
}

// IssuePeerCertificate implements the signing of an agent's peer
// certificate. Only agents may ask, each for its own node: the certificate
// names the node the caller's token is bound to. Followers answer too.
func (s *Server) IssuePeerCertificate(ctx context.Context, req *nodeworkv1.PeerCertificateRequest) (*nodeworkv1.PeerCertificateResponse, error) {
	if s.opts.PeerSigner == nil {
		return nil, status.Error(codes.Unimplemented, "this coordinator does not issue peer certificates")
	}
	id, err := s.authenticate(ctx)
	if err != nil {
		s.metrics.issued(authRefusal(err))
		return nil, err
	}
	if err := auth.CheckNode(id, req.GetNodeName()); err != nil {
		s.metrics.issued("forbidden")
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	chain, bundle, err := s.opts.PeerSigner.SignPeer(ctx, req.GetCsr(), id.NodeName)
	if err != nil {
		if errors.Is(err, ErrBadCertificateRequest) {
			s.metrics.issued("bad_request")
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		s.metrics.issued("error")
		return nil, status.Error(codes.Unavailable, "sign the peer certificate: "+err.Error())
	}
	s.metrics.issued("issued")
	klog.FromContext(ctx).WithName("nodework").V(2).Info("Issued a peer certificate", "node", id.NodeName)
	return &nodeworkv1.PeerCertificateResponse{CertificateChain: chain, TrustBundle: bundle}, nil
}

// awaitHello reads the first message, which must be a valid Hello.
func (s *Server) awaitHello(ctx context.Context, stream nodeworkv1.NodeWork_ConnectServer, seq *nodework.Sequencer) (*nodeworkv1.Hello, error) {
	type result struct {
		m   *nodeworkv1.AgentMessage
		err error
	}
	res := make(chan result, 1)
	go func() {
		m, err := stream.Recv()
		res <- result{m, err}
	}()
	timer := time.NewTimer(s.opts.HelloTimeout)
	defer timer.Stop()
	select {
	case r := <-res:
		if r.err != nil {
			return nil, fmt.Errorf("read hello: %w", r.err)
		}
		if err := nodework.ValidateAgentMessage(r.m); err != nil {
			return nil, err
		}
		if err := seq.AcceptAgent(r.m); err != nil {
			return nil, err
		}
		return r.m.GetHello(), nil
	case <-timer.C:
		return nil, fmt.Errorf("no hello within %s", s.opts.HelloTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// receive reads reports until the stream ends or breaks the protocol.
func (s *Server) receive(ctx context.Context, stream nodeworkv1.NodeWork_ConnectServer, seq *nodework.Sequencer, node string) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := nodework.ValidateAgentMessage(m); err != nil {
			return err
		}
		if err := seq.AcceptAgent(m); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err() // replaced or ended: its reports are stale
		}
		if r := m.GetReport(); r != nil {
			s.metrics.reports.WithLabelValues(metricKind(r.GetKind())).Inc()
			s.opts.Store.Report(node, r)
		}
	}
}

// register records a session, ending any older one for the node, and
// returns bootstrap peers for the mesh.
// register adds the session of a new stream. It checks leadership again,
// under the lock Disconnect takes: a replica that lost the lease while the
// stream was being set up (authentication can take seconds when the
// apiserver is hard to reach, which is often why the lease was lost) would
// otherwise keep a session Disconnect has already passed, and the agent's
// reports would go to a standby for good.
func (s *Server) register(info AgentInfo, cancel context.CancelCauseFunc) (me *session, peers []*nodeworkv1.Peer, reconnect bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, nil, false, errShutdown
	}
	if !s.opts.IsLeader() {
		return nil, nil, false, ErrNotLeader
	}
	if old := s.sessions[info.Node]; old != nil {
		old.cancel(errReplaced)
	}
	me = &session{info: info, cancel: cancel}
	s.sessions[info.Node] = me
	reconnect = s.seen[info.Node]
	s.seen[info.Node] = true
	for node, ss := range s.sessions {
		if node != info.Node && ss.info.MeshAddress != "" {
			peers = append(peers, &nodeworkv1.Peer{NodeName: node, MeshAddress: ss.info.MeshAddress})
		}
	}
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	if len(peers) > maxBootstrapPeers {
		peers = peers[:maxBootstrapPeers]
	}
	return me, peers, reconnect, nil
}

// maxBootstrapPeers is how many peers an agent gets to join through.
const maxBootstrapPeers = 16

func (s *Server) unregister(me *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Only remove our own session, not a newer one that replaced it.
	if s.sessions[me.info.Node] == me {
		delete(s.sessions, me.info.Node)
	}
}

// sender numbers outgoing messages; only the session goroutine uses it.
type sender struct {
	stream nodeworkv1.NodeWork_ConnectServer
	seq    uint64
}

func (o *sender) send(m *nodeworkv1.CoordinatorMessage) error {
	o.seq++
	m.Seq = o.seq
	if err := o.stream.Send(m); err != nil {
		return fmt.Errorf("send to agent: %w", err)
	}
	return nil
}

// sync sends the full set and records it as sent.
func (o *sender) sync(items []*nodeworkv1.WorkItem, sent map[string]*nodeworkv1.WorkItem) error {
	clear(sent)
	for _, it := range items {
		sent[it.GetId()] = it
	}
	return o.send(&nodeworkv1.CoordinatorMessage{Body: &nodeworkv1.CoordinatorMessage_Sync{Sync: &nodeworkv1.WorkSync{Items: items}}})
}

// diff sends what changed since the last send: upserts for new or replaced
// items (the store replaces an item's pointer on every change) and removes.
func (o *sender) diff(items []*nodeworkv1.WorkItem, sent map[string]*nodeworkv1.WorkItem) error {
	now := make(map[string]bool, len(items))
	for _, it := range items {
		now[it.GetId()] = true
		if sent[it.GetId()] == it {
			continue
		}
		if err := o.send(&nodeworkv1.CoordinatorMessage{Body: &nodeworkv1.CoordinatorMessage_Upsert{Upsert: it}}); err != nil {
			return err
		}
		sent[it.GetId()] = it
	}
	for id := range sent {
		if now[id] {
			continue
		}
		if err := o.send(&nodeworkv1.CoordinatorMessage{Body: &nodeworkv1.CoordinatorMessage_Remove{Remove: &nodeworkv1.WorkRemove{Id: id}}}); err != nil {
			return err
		}
		delete(sent, id)
	}
	return nil
}
