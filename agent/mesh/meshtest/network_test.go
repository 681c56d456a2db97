package meshtest_test

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/agent/mesh/meshtest"
)

// bound limits every wait in these tests.
const bound = 10 * time.Second

// recvPacket waits for one packet on t.
func recvPacket(tb testing.TB, t *meshtest.Transport) *memberlist.Packet {
	tb.Helper()
	select {
	case p := <-t.PacketCh():
		return p
	case <-time.After(bound):
		tb.Fatal("no packet arrived")
		return nil
	}
}

func TestNetwork(t *testing.T) {
	netw := meshtest.NewNetwork("a", "b")
	t.Cleanup(netw.Close)
	a, b := netw.Transport("a"), netw.Transport("b")

	ip, port, err := a.FinalAdvertiseAddr("", 0)
	require.NoError(t, err)
	require.Equal(t, netw.Addr("a"), net.JoinHostPort(ip.String(), strconv.Itoa(port)))

	t.Run("packets flow", func(t *testing.T) {
		_, err := a.WriteTo([]byte("hello"), netw.Addr("b"))
		require.NoError(t, err)
		require.Equal(t, []byte("hello"), recvPacket(t, b).Buf)
	})

	t.Run("streams flow", func(t *testing.T) {
		conn, err := a.DialTimeout(netw.Addr("b"), time.Second)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		var in net.Conn
		select {
		case in = <-b.StreamCh():
		case <-time.After(bound):
			t.Fatal("no stream arrived")
		}
		defer func() { _ = in.Close() }()
		go func() { _, _ = conn.Write([]byte("x")) }()
		buf := make([]byte, 1)
		_, err = io.ReadFull(in, buf)
		require.NoError(t, err)
		require.Equal(t, "x", string(buf))
	})

	t.Run("cut drops packets and refuses streams", func(t *testing.T) {
		netw.Cut("b")
		_, err := a.WriteToAddress([]byte("lost"), memberlist.Address{Addr: netw.Addr("b")})
		require.NoError(t, err, "lost packets are not errors")
		_, err = a.DialAddressTimeout(memberlist.Address{Name: "b"}, time.Second)
		require.ErrorContains(t, err, "network cut")
		_, err = b.DialTimeout(netw.Addr("a"), time.Second)
		require.ErrorContains(t, err, "network cut")

		netw.Restore("b")
		_, err = a.WriteTo([]byte("after"), netw.Addr("b"))
		require.NoError(t, err)
		require.Equal(t, []byte("after"), recvPacket(t, b).Buf)
	})

	t.Run("a shut down endpoint drops traffic without blocking", func(t *testing.T) {
		require.NoError(t, b.Shutdown())
		for range 3 {
			_, err := a.WriteTo([]byte("nobody"), netw.Addr("b"))
			require.NoError(t, err)
		}
		conn, err := a.DialTimeout(netw.Addr("b"), time.Second)
		require.NoError(t, err)
		_, err = conn.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.EOF, "the stream is closed by the network")

		// A packet that was in flight when b2 attached may still reach b2
		// (like a datagram arriving after a restart), so read until ours.
		b2 := netw.Transport("b")
		sent := make(chan error, 1)
		go func() {
			_, err := a.WriteTo([]byte("again"), netw.Addr("b"))
			sent <- err
		}()
		for got := ""; got != "again"; {
			got = string(recvPacket(t, b2).Buf)
		}
		require.NoError(t, <-sent)
	})

	t.Run("unknown address", func(t *testing.T) {
		_, err := a.DialTimeout("127.0.0.1:9", time.Second)
		require.ErrorContains(t, err, "no route")
	})
}
