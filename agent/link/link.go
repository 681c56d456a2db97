// Package link keeps the agent's one stream to the coordinator: it dials
// with TLS and the agent's projected token, says Hello, feeds the work it
// receives to the runner, sends the runner's reports back, and reconnects
// with jittered backoff whenever the stream breaks. The runner keeps working
// while the link is down.
package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/agent/work"
	"github.com/shoal-io/shoal/protocol/nodework"
	nodeworkv1 "github.com/shoal-io/shoal/protocol/nodework/v1"
)

// Config configures a Link.
type Config struct {
	// Address is the coordinator's host:port.
	Address string
	// ServerName is the name the coordinator's certificate must carry.
	ServerName string
	// CAFile holds the PEM bundle the coordinator's certificate must chain
	// to; it is re-read on every dial so a rotated bundle is picked up.
	CAFile string
	// Insecure dials without TLS (tests and benchmarks on loopback only).
	Insecure bool
	// TokenFile holds the agent's projected ServiceAccount token; re-read on
	// every dial (kubelet rotates it).
	TokenFile string
	// Token is used instead of TokenFile when set (tests, benchmarks).
	Token string
	// Hello returns the agent's hello; held work is filled in by the link.
	Hello func() *nodeworkv1.Hello
	// Runner runs the work.
	Runner *work.Runner
	// OnPeers receives mesh bootstrap peers from the coordinator.
	OnPeers func([]*nodeworkv1.Peer)
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults 200 ms
	// and 2 s); the delay doubles per failure with full jitter, and resets
	// after a stream that lived StableAfter (default 10 s). 2 s keeps a
	// coordinator's return quick to reach the nodes (what agents did
	// meanwhile shows within about that), and spreads 1,000 agents'
	// reconnects over about 2 s (make bench-nodework).
	MinBackoff, MaxBackoff, StableAfter time.Duration
	// DialTimeout bounds one connection attempt (default 2 s). A dial to a
	// Service whose endpoints are changing can otherwise hang for gRPC's
	// 20 s, long after the new leader is up.
	DialTimeout time.Duration
	// Registerer receives the link's metrics (nil: not registered).
	Registerer prometheus.Registerer
}

// setupTimeout bounds the wait for Welcome and the first WorkSync.
const setupTimeout = 30 * time.Second

// Link is the agent's side of the node-work stream.
type Link struct {
	cfg       Config
	connected atomic.Bool
	// conn is the current session's connection (nil between sessions);
	// ReviewAccess calls go over it.
	conn    atomic.Pointer[grpc.ClientConn]
	metrics linkMetrics
}

// ErrNotConnected is returned by ReviewAccess between sessions.
var ErrNotConnected = errors.New("coordinator not connected")

// ReviewAccess asks the coordinator whether token may use verb on path, an
// endpoint of this agent (see package agent/endpointauth), over the
// current session's connection.
func (l *Link) ReviewAccess(ctx context.Context, token, verb, path string) (*nodeworkv1.AccessReviewResponse, error) {
	conn := l.conn.Load()
	if conn == nil {
		return nil, ErrNotConnected
	}
	own, err := l.token()
	if err != nil {
		return nil, err
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+own)
	resp, err := nodeworkv1.NewNodeWorkClient(conn).ReviewAccess(ctx, &nodeworkv1.AccessReviewRequest{Token: token, Verb: verb, Path: path})
	if err != nil {
		return nil, fmt.Errorf("coordinator access review: %w", err)
	}
	return resp, nil
}

// IssuePeerCertificate asks the coordinator to sign csr, a DER
// certificate request, as node's peer certificate (package
// imagewarm/peertls), over the current session's connection. It returns
// the certificate chain and the trust bundle, PEM; ErrNotConnected
// between sessions.
func (l *Link) IssuePeerCertificate(ctx context.Context, node string, csr []byte) (chainPEM, bundlePEM []byte, err error) {
	conn := l.conn.Load()
	if conn == nil {
		return nil, nil, ErrNotConnected
	}
	own, err := l.token()
	if err != nil {
		return nil, nil, err
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+own)
	resp, err := nodeworkv1.NewNodeWorkClient(conn).IssuePeerCertificate(ctx,
		&nodeworkv1.PeerCertificateRequest{Csr: csr, NodeName: node})
	if err != nil {
		return nil, nil, fmt.Errorf("coordinator peer certificate: %w", err)
	}
	return resp.GetCertificateChain(), resp.GetTrustBundle(), nil
}

type linkMetrics struct {
	connected prometheus.GaugeFunc
	connects  *prometheus.CounterVec
	received  *prometheus.CounterVec
}

// New returns a link; call Run.
func New(cfg Config) *Link {
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 2 * time.Second
	}
	if cfg.StableAfter == 0 {
		cfg.StableAfter = 10 * time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	l := &Link{cfg: cfg}
	l.metrics = linkMetrics{
		connected: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shoal_agent_coordinator_connected", Help: "1 while the agent has a live stream to the coordinator.",
		}, func() float64 {
			if l.connected.Load() {
				return 1
			}
			return 0
		}),
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_agent_coordinator_connects_total", Help: "Stream attempts to the coordinator by result (ok, or the gRPC code that ended it early).",
		}, []string{"result"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shoal_agent_coordinator_messages_total", Help: "Messages received from the coordinator by type.",
		}, []string{"type"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(l.metrics.connected, l.metrics.connects, l.metrics.received)
	}
	return l
}

// Connected reports whether the stream is up.
func (l *Link) Connected() bool { return l.connected.Load() }

// Run keeps the stream up until ctx ends.
func (l *Link) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("link")
	ctx = klog.NewContext(ctx, log)
	select {
	case <-l.cfg.Runner.Ready():
	case <-ctx.Done():
		return nil
	}
	backoff := l.cfg.MinBackoff
	for {
		start := time.Now()
		err := l.session(ctx)
		l.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) >= l.cfg.StableAfter {
			backoff = l.cfg.MinBackoff
		}
		// The delay runs from the start of the failed attempt: an attempt
		// that took its whole dial timeout has waited already.
		delay := time.Duration(rand.Int64N(int64(backoff))) + l.cfg.MinBackoff/2 - time.Since(start)
		delay = max(delay, l.cfg.MinBackoff/2)
		log.Info("Coordinator stream down; reconnecting", "err", err, "in", delay.Round(time.Millisecond))
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		backoff = min(2*backoff, l.cfg.MaxBackoff)
	}
}

// DialOptions are the transport settings of the agent's connection.
func (l *Link) dialOptions() ([]grpc.DialOption, error) {
	opts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(nodework.MaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 15 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: l.cfg.DialTimeout}),
	}
	if l.cfg.Insecure {
		return append(opts, grpc.WithTransportCredentials(insecure.NewCredentials())), nil
	}
	pem, err := os.ReadFile(l.cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("read coordinator CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("coordinator CA bundle %s has no PEM certificates", l.cfg.CAFile)
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: l.cfg.ServerName, MinVersion: tls.VersionTLS12})
	return append(opts, grpc.WithTransportCredentials(creds)), nil
}

func (l *Link) token() (string, error) {
	if l.cfg.Token != "" {
		return l.cfg.Token, nil
	}
	b, err := os.ReadFile(l.cfg.TokenFile)
	if err != nil {
		return "", fmt.Errorf("read agent token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// session runs one stream from dial to break.
func (l *Link) session(ctx context.Context) error {
	log := klog.FromContext(ctx)
	opts, err := l.dialOptions()
	if err != nil {
		l.metrics.connects.WithLabelValues("config").Inc()
		return err
	}
	token, err := l.token()
	if err != nil {
		l.metrics.connects.WithLabelValues("config").Inc()
		return err
	}
	conn, err := grpc.NewClient(l.cfg.Address, opts...)
	if err != nil {
		l.metrics.connects.WithLabelValues("config").Inc()
		return fmt.Errorf("dial coordinator %s: %w", l.cfg.Address, err)
	}
	defer func() { _ = conn.Close() }()
	l.conn.Store(conn)
	defer l.conn.CompareAndSwap(conn, nil)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := nodeworkv1.NewNodeWorkClient(conn).Connect(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token))
	if err != nil {
		l.metrics.connects.WithLabelValues("dial").Inc()
		return fmt.Errorf("open stream to %s: %w", l.cfg.Address, err)
	}

	out := &sender{stream: stream}
	hello := l.cfg.Hello()
	hello.ProtocolVersion = nodework.ProtocolVersion
	hello.Held = l.cfg.Runner.Held()
	if err := out.send(&nodeworkv1.AgentMessage{Body: &nodeworkv1.AgentMessage_Hello{Hello: hello}}); err != nil {
		l.metrics.connects.WithLabelValues("hello").Inc()
		return err
	}

	// The coordinator answers with Welcome and the full WorkSync at once; a
	// coordinator that does not is treated as gone.
	setup := time.AfterFunc(setupTimeout, cancel)
	var seq nodework.Sequencer
	welcome, err := l.recv(stream, &seq)
	if err != nil {
		l.metrics.connects.WithLabelValues(resultOf(err)).Inc()
		return fmt.Errorf("await welcome: %w", err)
	}
	if welcome.GetWelcome() == nil {
		return fmt.Errorf("coordinator's first message is not a welcome")
	}
	l.metrics.connects.WithLabelValues("ok").Inc()
	l.connected.Store(true)
	log.Info("Connected to coordinator", "coordinator", welcome.GetWelcome().GetCoordinator(),
		"protocol", welcome.GetWelcome().GetProtocolVersion(), "peers", len(welcome.GetWelcome().GetPeers().GetPeers()))
	if l.cfg.OnPeers != nil {
		l.cfg.OnPeers(welcome.GetWelcome().GetPeers().GetPeers())
	}

	// Apply the full set before re-reporting: a new leader numbers
	// generations afresh, and a report of the old spec must not reach it as
	// the state of a changed one.
	first, err := l.recv(stream, &seq)
	if err != nil {
		return fmt.Errorf("await work sync: %w", err)
	}
	sync := first.GetSync()
	if sync == nil {
		return fmt.Errorf("coordinator's second message is not a work sync")
	}
	l.metrics.received.WithLabelValues("sync").Inc()
	l.cfg.Runner.Sync(sync.GetItems())
	setup.Stop()

	// The coordinator lost whatever it knew: send the full observed state.
	l.cfg.Runner.MarkAllDirty()

	recvErr := make(chan error, 1)
	go func() { recvErr <- l.receive(stream, &seq) }()
	for {
		select {
		case <-l.cfg.Runner.Changed():
			for _, r := range l.cfg.Runner.TakeDirty() {
				if err := out.send(&nodeworkv1.AgentMessage{Body: &nodeworkv1.AgentMessage_Report{Report: r}}); err != nil {
					l.cfg.Runner.MarkAllDirty()
					return err
				}
			}
		case err := <-recvErr:
			// Reports taken but not sent are re-sent in full after reconnect.
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *Link) recv(stream nodeworkv1.NodeWork_ConnectClient, seq *nodework.Sequencer) (*nodeworkv1.CoordinatorMessage, error) {
	m, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if err := nodework.ValidateCoordinatorMessage(m); err != nil {
		return nil, err
	}
	if err := seq.AcceptCoordinator(m); err != nil {
		return nil, err
	}
	return m, nil
}

// receive applies the coordinator's messages to the runner until the stream
// ends or the coordinator breaks the protocol.
func (l *Link) receive(stream nodeworkv1.NodeWork_ConnectClient, seq *nodework.Sequencer) error {
	for {
		m, err := l.recv(stream, seq)
		if err != nil {
			if errors.Is(err, nodework.ErrProtocol) {
				return fmt.Errorf("coordinator broke the protocol: %w", err)
			}
			return err
		}
		switch b := m.GetBody().(type) {
		case *nodeworkv1.CoordinatorMessage_Sync:
			l.metrics.received.WithLabelValues("sync").Inc()
			l.cfg.Runner.Sync(b.Sync.GetItems())
		case *nodeworkv1.CoordinatorMessage_Upsert:
			l.metrics.received.WithLabelValues("upsert").Inc()
			l.cfg.Runner.Upsert(b.Upsert)
		case *nodeworkv1.CoordinatorMessage_Remove:
			l.metrics.received.WithLabelValues("remove").Inc()
			l.cfg.Runner.Remove(b.Remove.GetId())
		case *nodeworkv1.CoordinatorMessage_Peers:
			l.metrics.received.WithLabelValues("peers").Inc()
			if l.cfg.OnPeers != nil {
				l.cfg.OnPeers(b.Peers.GetPeers())
			}
		}
	}
}

func resultOf(err error) string {
	if errors.Is(err, nodework.ErrProtocol) {
		return "protocol"
	}
	if s, ok := statusCode(err); ok {
		return s
	}
	return "error"
}

// sender numbers the agent's messages; only the session goroutine uses it.
type sender struct {
	stream nodeworkv1.NodeWork_ConnectClient
	seq    uint64
}

func (o *sender) send(m *nodeworkv1.AgentMessage) error {
	o.seq++
	m.Seq = o.seq
	if err := o.stream.Send(m); err != nil {
		return fmt.Errorf("send to coordinator: %w", err)
	}
	return nil
}

// statusCode names the gRPC code of err, when it has one.
func statusCode(err error) (string, bool) {
	s, ok := status.FromError(err)
	if !ok || s.Code() == codes.OK {
		return "", false
	}
	return strings.ToLower(s.Code().String()), true
}
