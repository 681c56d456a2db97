package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
)

func TestParseMirrorRegistries(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []MirrorRegistry
		wantErr string
	}{
		{in: "", want: nil},
		{in: "_default", want: []MirrorRegistry{{Host: "_default"}}},
		{in: " _default , 172.31.250.1:5001=http://172.31.250.1:5001 ,",
			want: []MirrorRegistry{{Host: "_default"}, {Host: "172.31.250.1:5001", Server: "http://172.31.250.1:5001"}}},
		{in: "docker.io=https://registry-1.docker.io", want: []MirrorRegistry{{Host: "docker.io", Server: "https://registry-1.docker.io"}}},
		{in: "a/b", wantErr: "path separators"},
		{in: "a..b", wantErr: `".."`},
		{in: "reg=ftp://x", wantErr: "http:// or https://"},
		{in: "reg=http://u:p@x", wantErr: "user info"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMirrorRegistries(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, "--mirror-registries")
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestKeepInstalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		type result struct {
			changed bool
			err     error
		}
		results := []result{
			{false, errRuntimeNotConnected},     // retried after 1 s
			{false, errors.New("no certs dir")}, // retried after 10 s
			{true, nil},                         // installed: checked again after 1 min
			{false, nil},                        // still there
			{true, nil},                         // gone and put back
		}
		start := time.Now()
		var at []time.Duration
		require.NoError(t, keepInstalled(ctx, logger, 10*time.Second, time.Minute, func(context.Context) (bool, error) {
			at = append(at, time.Since(start))
			r := results[len(at)-1]
			if len(at) == len(results) {
				cancel()
			}
			return r.changed, r.err
		}))
		require.Equal(t, []time.Duration{0, time.Second, 11 * time.Second, 71 * time.Second, 131 * time.Second}, at)
		logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
		require.Equal(t, 1, strings.Count(logs, "had lost the agent's block"), logs)
		require.Contains(t, logs, "no certs dir")
	})
}
