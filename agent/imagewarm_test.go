package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
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
