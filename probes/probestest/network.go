package probestest

import (
	"context"
	"net"
	"sync"
	"syscall"
)

// Network is an in-memory TCP network: Listen opens a listener on an
// address ("10.0.0.5:8080"), Dial (a probes.DialFunc) connects to it
// through net.Pipe. Dialing an address nobody listens on is refused at
// once; a listener that does not Accept makes dials wait until their
// context ends, like a peer that drops SYNs. Every operation blocks on
// channels only, so it works inside testing/synctest bubbles, where a real
// socket would stop the bubble's clock.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{listeners: map[string]*Listener{}}
}

// Listen opens a listener on addr, replacing any earlier one.
func (n *Network) Listen(addr string) *Listener {
	l := &Listener{n: n, addr: pipeAddr(addr), conns: make(chan net.Conn), closed: make(chan struct{})}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listeners[addr] = l
	return l
}

// Dial connects to the listener on address; it is a probes.DialFunc.
func (n *Network) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[address]
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Addr: pipeAddr(address), Err: syscall.ECONNREFUSED}
	if l == nil {
		return nil, refused
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, refused
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Addr: pipeAddr(address), Err: ctx.Err()}
	}
}

// Listener is a listener of a Network; it implements net.Listener.
type Listener struct {
	n         *Network
	addr      pipeAddr
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

var _ net.Listener = (*Listener)(nil)

// Accept waits for a connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops the listener: later dials to its address are refused.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.n.mu.Lock()
		defer l.n.mu.Unlock()
		if l.n.listeners[string(l.addr)] == l {
			delete(l.n.listeners, string(l.addr))
		}
	})
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

// pipeAddr is the address of a Network listener.
type pipeAddr string

// Network implements net.Addr.
func (a pipeAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a pipeAddr) String() string { return string(a) }
