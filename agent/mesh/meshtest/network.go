// Package meshtest provides an in-memory network for mesh tests, built on
// memberlist's MockNetwork (no sockets), that can cut a node off and bring
// it back, and that survives a node's memberlist being shut down and
// re-created under the same name.
//
// MockNetwork alone blocks a sender forever once the receiving memberlist
// has shut down (its channels are unbuffered and nobody reads them any
// more), and its address maps are not safe to grow while nodes run. Network
// therefore creates every node's MockTransport up front and keeps one
// long-lived pump per node that hands traffic to the node's current
// memberlist, or drops it when there is none or the node is cut off.
package meshtest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Network is a set of named in-memory endpoints. Create it with NewNetwork
// and Close it when the test ends (after shutting down every memberlist).
type Network struct {
	mock memberlist.MockNetwork
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	byName map[string]*endpoint
	byAddr map[string]*endpoint
	closed bool
}

// endpoint is one node's fixed address and its current consumer.
type endpoint struct {
	name  string
	addr  string
	inner *memberlist.MockTransport
	cut   bool       // guarded by Network.mu
	cur   *Transport // guarded by Network.mu
}

// NewNetwork returns a network with one endpoint per name; every address is
// fixed for the network's life.
func NewNetwork(names ...string) *Network {
	n := &Network{
		stop:   make(chan struct{}),
		byName: map[string]*endpoint{},
		byAddr: map[string]*endpoint{},
	}
	for _, name := range names {
		inner := n.mock.NewTransport(name)
		ip, port, err := inner.FinalAdvertiseAddr("", 0)
		if err != nil {
			panic(fmt.Sprintf("meshtest: mock transport address: %v", err))
		}
		ep := &endpoint{name: name, addr: net.JoinHostPort(ip.String(), fmt.Sprint(port)), inner: inner}
		n.byName[name] = ep
		n.byAddr[ep.addr] = ep
	}
	for _, ep := range n.byName {
		n.wg.Add(2)
		go n.pumpPackets(ep)
		go n.pumpStreams(ep)
	}
	return n
}

// Close stops the pumps. Shut down every memberlist first.
func (n *Network) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	close(n.stop)
	n.wg.Wait()
}

// Transport returns a new transport for the endpoint name, for one
// memberlist instance. It replaces the endpoint's previous transport, so a
// node can be restarted under the same name and address.
func (n *Network) Transport(name string) *Transport {
	n.mu.Lock()
	defer n.mu.Unlock()
	ep := n.byName[name]
	if ep == nil {
		panic(fmt.Sprintf("meshtest: unknown endpoint %q", name))
	}
	t := &Transport{
		net:      n,
		ep:       ep,
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		done:     make(chan struct{}),
	}
	if ep.cur != nil {
		ep.cur.closeLocked()
	}
	ep.cur = t
	return t
}

// Addr returns the endpoint's ip:port.
func (n *Network) Addr(name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ep := n.byName[name]; ep != nil {
		return ep.addr
	}
	return ""
}

// Cut drops all traffic to and from name (in-flight streams excepted),
// like pulling its network cable.
func (n *Network) Cut(name string) { n.setCut(name, true) }

// Restore undoes Cut.
func (n *Network) Restore(name string) { n.setCut(name, false) }

// setCut sets an endpoint's cut flag.
func (n *Network) setCut(name string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ep := n.byName[name]; ep != nil {
		ep.cut = cut
	}
}

// blocked reports whether traffic from src to dst is dropped.
func (n *Network) blocked(src *endpoint, dst memberlist.Address) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if src.cut {
		return true
	}
	d := n.byAddr[dst.Addr]
	if dst.Name != "" {
		d = n.byName[dst.Name]
	}
	return d != nil && d.cut
}

// consumer returns the endpoint's live transport, or nil when traffic must
// be dropped.
func (n *Network) consumer(ep *endpoint) *Transport {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ep.cut {
		return nil
	}
	return ep.cur
}

// pumpPackets hands packets arriving at ep to its current transport.
func (n *Network) pumpPackets(ep *endpoint) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case p := <-ep.inner.PacketCh():
			t := n.consumer(ep)
			if t == nil {
				continue
			}
			select {
			case t.packetCh <- p:
			case <-t.done:
			case <-n.stop:
				return
			}
		}
	}
}

// pumpStreams hands connections arriving at ep to its current transport.
func (n *Network) pumpStreams(ep *endpoint) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case c := <-ep.inner.StreamCh():
			t := n.consumer(ep)
			if t == nil {
				_ = c.Close()
				continue
			}
			select {
			case t.streamCh <- c:
			case <-t.done:
				_ = c.Close()
			case <-n.stop:
				_ = c.Close()
				return
			}
		}
	}
}

// Transport is one memberlist instance's view of an endpoint. It implements
// memberlist.NodeAwareTransport.
type Transport struct {
	net      *Network
	ep       *endpoint
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	done     chan struct{}
	closed   bool // guarded by Network.mu
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// errCut is returned for dials across a cut.
var errCut = errors.New("i/o timeout (meshtest: network cut)")

// FinalAdvertiseAddr returns the endpoint's fixed address.
func (t *Transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	addr, p, err := t.ep.inner.FinalAdvertiseAddr(ip, port)
	if err != nil {
		return nil, 0, fmt.Errorf("meshtest: %w", err)
	}
	return addr, p, nil
}

// WriteTo sends a packet to addr.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends a packet; across a cut it is silently lost, like UDP.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.net.blocked(t.ep, a) {
		return time.Now(), nil
	}
	ts, err := t.ep.inner.WriteToAddress(b, a)
	if err != nil {
		return ts, fmt.Errorf("meshtest: %w", err)
	}
	return ts, nil
}

// PacketCh returns incoming packets.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout opens a stream to addr.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout opens a stream; across a cut it fails like a TCP
// connect timeout.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.net.blocked(t.ep, a) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errCut}
	}
	c, err := t.ep.inner.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, fmt.Errorf("meshtest: %w", err)
	}
	return c, nil
}

// StreamCh returns incoming streams.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown detaches the transport from its endpoint; traffic to the
// endpoint is dropped until another Transport is created for it.
func (t *Transport) Shutdown() error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	t.closeLocked()
	return nil
}

// closeLocked detaches t; Network.mu must be held.
func (t *Transport) closeLocked() {
	if t.closed {
		return
	}
	t.closed = true
	close(t.done)
	if t.ep.cur == t {
		t.ep.cur = nil
	}
}
