// Command node is one simulated node of the image-swarm benchmark (make
// bench-p2p): the agent's mesh and imagewarm/node on a loopback address of
// its own, with token buckets standing in for the node's bandwidth. The
// benchmark starts one per node and drives it over stdin/stdout, one JSON
// object per line:
//
//	→ {"op":"warm","image":"127.0.0.1:5000/bench/app:v1"}
//	← {"event":"progress","bytes":1048576}   (every 100 ms while warming)
//	← {"event":"done","seconds":16.2}        (or "error":"...")
//	→ {"op":"stats"}
//	← {"event":"stats","counters":{...}}
//
// It prints {"event":"ready"} once it serves and has joined the mesh.
package main

import (
	"bufio"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/agent/mesh"
	"github.com/shoal-io/shoal/imagewarm/node"
	"github.com/shoal-io/shoal/imagewarm/peertls"
	"github.com/shoal-io/shoal/imagewarm/swarm"
	"github.com/shoal-io/shoal/imagewarm/tracker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}

// options are the node's flags.
type options struct {
	name, addr, join, storeDir, mode, registry, meshKey string
	port, meshPort, maxUploads                          int
	spreadWindow                                        time.Duration
	ingress, egress                                     int64
	poison                                              bool
	cpuProfile, peerTLSCA                               string
	maxInflight, perPeer                                int
	poll                                                time.Duration
}

func run() error {
	var o options
	flag.StringVar(&o.name, "name", "", "node name")
	flag.StringVar(&o.addr, "addr", "127.0.0.2", "loopback address of this node")
	flag.IntVar(&o.port, "port", 5100, "peer/tracker HTTP port")
	flag.IntVar(&o.meshPort, "mesh-port", 7946, "memberlist port")
	flag.StringVar(&o.join, "join", "", "comma-separated mesh addresses to join")
	flag.StringVar(&o.storeDir, "store", "", "blob store directory")
	flag.StringVar(&o.mode, "mode", "swarm", "swarm, spegel-like or naive")
	flag.StringVar(&o.registry, "insecure-registry", "", "registry host:port reached over plain HTTP")
	flag.StringVar(&o.meshKey, "mesh-key", "", "base64 memberlist key")
	flag.Int64Var(&o.ingress, "ingress", 0, "ingress bytes/s (0: unbounded)")
	flag.Int64Var(&o.egress, "egress", 0, "egress bytes/s (0: unbounded)")
	flag.IntVar(&o.maxUploads, "max-uploads", 0, "concurrent peer uploads (0: default)")
	flag.DurationVar(&o.spreadWindow, "spread-window", 0, "blob server spread window (0: default, negative: off)")
	flag.BoolVar(&o.poison, "poison", false, "flip bytes in every blob response to peers")
	flag.IntVar(&o.maxInflight, "max-inflight", 0, "piece requests in flight per node (0: default)")
	flag.IntVar(&o.perPeer, "per-peer", 0, "piece requests per holder per blob (0: default)")
	flag.DurationVar(&o.poll, "poll", 0, "tracker lookup and announce interval (0: the agent's default)")
	flag.StringVar(&o.peerTLSCA, "peer-tls-ca", "", "directory with ca.crt and ca.key: serve and reach peers over mutual TLS with a certificate signed by that CA")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile here (for tuning the benchmark)")
	klog.InitFlags(nil)
	flag.Parse()
	mode, err := swarm.ParseMode(o.mode)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := klog.Background().WithValues("node", o.name)

	reg := prometheus.NewRegistry()
	counting := &countingTransport{}
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{o.addr}, BindPort: o.meshPort})
	if err != nil {
		return fmt.Errorf("mesh transport: %w", err)
	}
	counting.init(nt)
	var key []byte
	if o.meshKey != "" {
		f, err := os.CreateTemp("", "meshkey")
		if err != nil {
			return err
		}
		_, _ = f.WriteString(o.meshKey)
		_ = f.Close()
		key, err = mesh.LoadKey(f.Name())
		_ = os.Remove(f.Name())
		if err != nil {
			return err
		}
	}
	endpoint := net.JoinHostPort(o.addr, strconv.Itoa(o.port))
	var n *node.Node
	m, err := mesh.New(mesh.Config{
		NodeName: o.name, BindAddr: o.addr, BindPort: o.meshPort, AdvertiseAddr: o.addr, AdvertisePort: o.meshPort,
		Key: key, Meta: mesh.Meta{P2P: endpoint}, Transport: counting, Registerer: reg,
		OnChange: tracker.ForgetDeparted(func(node string) {
			if n != nil {
				n.Forget(node)
			}
		}),
	}, log)
	if err != nil {
		return fmt.Errorf("mesh: %w", err)
	}
	l, err := net.Listen("tcp", endpoint)
	if err != nil {
		return err
	}
	var ups []node.Upstream
	if o.registry != "" {
		ups = append(ups, node.Upstream{Registry: o.registry, Insecure: true})
	}
	cfg := node.Config{
		Name: o.name, Listener: l, StoreDir: o.storeDir, Members: tracker.MeshMembership(m), Mode: mode,
		IngressBytesPerSecond: o.ingress, EgressBytesPerSecond: o.egress, MaxPeerUploads: o.maxUploads, SpreadWindow: o.spreadWindow,
		Upstreams: ups, Registerer: reg, Logger: log,
		// The agent's defaults unless tuned: polling every 50 ms instead
		// of 250 gave the same η for 2.5 times the tracker RPCs.
		Fetch:     swarm.Config{Poll: o.poll, AnnounceInterval: o.poll, MaxInflight: o.maxInflight, PerPeer: o.perPeer},
		Transport: boundTransport(o.addr),
	}
	// Peer requests leave from the node's own address too, so that every
	// byte is attributed to the node that asked.
	peers := boundTransport(o.addr)
	if o.peerTLSCA != "" {
		if cfg.PeerTLS, err = peerIdentity(o.name, o.peerTLSCA); err != nil {
			return err
		}
		peers.TLSClientConfig = cfg.PeerTLS.ClientConfig()
	}
	cfg.Fetch.Peers = &http.Client{Transport: peers}
	if o.poison {
		cfg.WrapPeer = poison
	}
	if n, err = node.New(cfg); err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return m.Run(ctx) })
	g.Go(func() error { return n.Run(ctx) })
	out := &printer{w: bufio.NewWriter(os.Stdout)}
	g.Go(func() error {
		if o.join != "" {
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := m.Join(strings.Split(o.join, ",")); err == nil || time.Now().After(deadline) {
					break
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		out.print(map[string]any{"event": "ready"})
		return commands(ctx, n, m, reg, counting, out)
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// commands reads the benchmark's commands from stdin until it closes.
func commands(ctx context.Context, n *node.Node, m *mesh.Mesh, reg *prometheus.Registry, ct *countingTransport, out *printer) error {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var warming sync.WaitGroup
	defer warming.Wait()
	for {
		var line string
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case line, ok = <-lines:
			if !ok {
				return errors.New("stdin closed")
			}
		}
		var cmd struct{ Op, Image string }
		if err := json.Unmarshal([]byte(line), &cmd); err != nil {
			return fmt.Errorf("bad command %q: %w", line, err)
		}
		switch cmd.Op {
		case "warm":
			warming.Add(1)
			go func() {
				defer warming.Done()
				warm(ctx, n, cmd.Image, out)
			}()
		case "members":
			out.print(map[string]any{"event": "members", "count": len(tracker.MeshMembers(m.Members()))})
		case "stats":
			c := counters(reg)
			c["memberlist_sent_bytes"] = float64(ct.sent.Load())
			out.print(map[string]any{"event": "stats", "counters": c})
		default:
			return fmt.Errorf("unknown op %q", cmd.Op)
		}
	}
}

// warm warms an image, printing progress until it is done.
func warm(ctx context.Context, n *node.Node, image string, out *printer) {
	start := time.Now()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				var have int64
				for _, h := range n.Store().Holdings() {
					if h.Verified {
						have += h.Size
					} else {
						have += int64(h.Bitmap.Count()) * h.PieceSize
					}
				}
				out.print(map[string]any{"event": "progress", "bytes": have})
			}
		}
	}()
	_, err := n.Warm(wctx, image, nil)
	ev := map[string]any{"event": "done", "seconds": time.Since(start).Seconds()}
	if err != nil {
		ev["error"] = err.Error()
	}
	cancel()
	out.print(ev)
}

// boundTransport is an HTTP transport whose connections leave from addr.
func boundTransport(addr string) *http.Transport {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}, Timeout: 2 * time.Second}
	return &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64, DisableCompression: true,
		ResponseHeaderTimeout: 10 * time.Second}
}

// peerIdentity makes the node's peer TLS identity, its certificate
// signed with the CA in dir as the coordinator would sign it.
func peerIdentity(name, dir string) (*peertls.Identity, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("peer CA in %s: no PEM", dir)
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("peer CA certificate: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("peer CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("peer CA key cannot sign")
	}
	id, err := peertls.NewIdentity(peertls.Options{Node: name})
	if err != nil {
		return nil, err
	}
	csr, err := id.NewRequest()
	if err != nil {
		return nil, err
	}
	chain, err := peertls.Sign(peertls.SignRequest{CSR: csr, Node: name, CACert: caCert, CAKey: signer})
	if err != nil {
		return nil, err
	}
	return id, id.Install(chain, certPEM)
}

// counters sums every counter of reg by name (over labels).
func counters(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				out[mf.GetName()] += c.GetValue()
			}
		}
	}
	return out
}

// printer writes JSON lines to stdout, one at a time.
type printer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (p *printer) print(v any) {
	b, _ := json.Marshal(v)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.Write(append(b, '\n'))
	_ = p.w.Flush()
}

// poison wraps the peer handler so that every body it sends has its
// first byte of each write flipped: a peer serving corrupted data.
func poison(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&flipWriter{ResponseWriter: w}, r)
	})
}

// flipWriter flips the first byte of every write.
type flipWriter struct{ http.ResponseWriter }

// Write implements io.Writer.
func (f *flipWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	q := make([]byte, len(p))
	copy(q, p)
	q[0] ^= 0xff
	return f.ResponseWriter.Write(q)
}

// countingTransport is memberlist's network transport, counting the bytes
// it sends (packets and streams, both directions of a stream's writes).
type countingTransport struct {
	*memberlist.NetTransport
	sent    atomic.Int64
	streams chan net.Conn
}

func (c *countingTransport) init(nt *memberlist.NetTransport) {
	c.NetTransport = nt
	c.streams = make(chan net.Conn)
	go func() {
		for conn := range nt.StreamCh() {
			c.streams <- &countingConn{Conn: conn, sent: &c.sent}
		}
	}()
}

// WriteTo implements memberlist.Transport.
func (c *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	c.sent.Add(int64(len(b)))
	return c.NetTransport.WriteTo(b, addr)
}

// DialTimeout implements memberlist.Transport.
func (c *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := c.NetTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, sent: &c.sent}, nil
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (c *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	c.sent.Add(int64(len(b)))
	return c.NetTransport.WriteToAddress(b, a)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (c *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := c.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, sent: &c.sent}, nil
}

// StreamCh implements memberlist.Transport.
func (c *countingTransport) StreamCh() <-chan net.Conn { return c.streams }

// countingConn counts the bytes written to a connection.
type countingConn struct {
	net.Conn
	sent *atomic.Int64
}

// Write implements net.Conn.
func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}
