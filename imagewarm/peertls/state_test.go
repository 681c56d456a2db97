package peertls_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/shoal-io/shoal/imagewarm/peertls"
)

func TestStateFile(t *testing.T) {
	ca := newCA(t, "cluster")
	t.Run("a restarted agent keeps its certificate", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "peer", "identity.json")
		first := installed(t, ca, "node-a", peertls.Options{StateFile: file})
		fi, err := os.Stat(file)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

		again, err := peertls.NewIdentity(peertls.Options{Node: "node-a", StateFile: file})
		require.NoError(t, err)
		require.NotNil(t, again.Leaf())
		require.True(t, first.Leaf().Equal(again.Leaf()))
		// The key came back too: the restarted agent can hand it to TLS.
		c, err := again.ClientConfig().GetClientCertificate(nil)
		require.NoError(t, err)
		require.NotNil(t, c.PrivateKey)
	})
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, file string)
		node  string
	}{
		{"a corrupt file is ignored", func(t *testing.T, file string) {
			require.NoError(t, os.WriteFile(file, []byte("{not json"), 0o600))
		}, "node-a"},
		{"another node's file is ignored", func(*testing.T, string) {}, "node-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "identity.json")
			installed(t, ca, "node-a", peertls.Options{StateFile: file})
			tc.spoil(t, file)
			id, err := peertls.NewIdentity(peertls.Options{Node: tc.node, StateFile: file})
			require.NoError(t, err)
			require.Nil(t, id.Leaf())
		})
	}
	t.Run("Run keeps a loaded certificate until it is due", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Now())
		coord := &fakeCoordinator{ca: ca, clk: clk, validity: 30 * time.Minute}
		file := filepath.Join(t.TempDir(), "identity.json")
		first, err := peertls.NewIdentity(peertls.Options{Node: "node-a", StateFile: file, Clock: clk})
		require.NoError(t, err)
		csr, err := first.NewRequest()
		require.NoError(t, err)
		chain, bundle, err := coord.issue(t.Context(), csr)
		require.NoError(t, err)
		require.NoError(t, first.Install(chain, bundle))

		again, err := peertls.NewIdentity(peertls.Options{Node: "node-a", StateFile: file, Clock: clk})
		require.NoError(t, err)
		loaded := again.Leaf()
		require.NotNil(t, loaded)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- again.Run(ctx, coord.issue) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()
		require.Eventually(t, clk.HasWaiters, waitFor, tick, "Run waits for the loaded certificate to be due")
		require.Equal(t, int32(1), coord.calls.Load(), "Run asked for a certificate it did not need")
		clk.SetTime(renewal(loaded))
		require.Eventually(t, func() bool { return again.Leaf() != loaded }, waitFor, tick, "renewed when due")
		require.Equal(t, int32(2), coord.calls.Load())
	})
	t.Run("no file is a fresh start", func(t *testing.T) {
		id, err := peertls.NewIdentity(peertls.Options{Node: "node-a", StateFile: filepath.Join(t.TempDir(), "none.json")})
		require.NoError(t, err)
		require.Nil(t, id.Leaf())
	})
}
