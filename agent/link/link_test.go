package link

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestSessionDialTimeout: a coordinator address that accepts connections
// and never answers (a Service whose endpoints are changing) fails the
// attempt after DialTimeout, not after gRPC's 20 s, so the agent tries
// again while the new leader is already up.
func TestSessionDialTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			held <- c // accepted, never answered
		}
	}()
	t.Cleanup(func() {
		for {
			select {
			case c := <-held:
				_ = c.Close()
			default:
				return
			}
		}
	})

	l := New(Config{Address: lis.Addr().String(), Insecure: true, Token: "token", DialTimeout: 200 * time.Millisecond})
	// Well under gRPC's own 20 s connect timeout: the session must end on
	// DialTimeout, before this deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = l.session(ctx)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the attempt ran until the test's deadline: DialTimeout not applied (%v)", err)
	require.Equal(t, codes.Unavailable, status.Code(errorsCause(err)), "%v", err)
}

// errorsCause unwraps err to its gRPC status error.
func errorsCause(err error) error {
	for err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
	return err
}
