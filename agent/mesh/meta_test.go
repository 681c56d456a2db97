package mesh_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/agent/mesh"
)

func TestMetaRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		meta    mesh.Meta
		wantErr string
	}{
		{name: "empty", meta: mesh.Meta{}},
		{name: "full", meta: mesh.Meta{Endpoint: "10.0.0.7:9480", Zone: "eu-west-1a", Version: "v0.1.0", Arch: "arm64"}},
		{name: "ipv6", meta: mesh.Meta{Endpoint: "[fd00::7]:9480"}},
		{name: "at the limit", meta: mesh.Meta{Endpoint: strings.Repeat("x", 512-len(`{"e":""}`))}},
		{name: "over the limit", meta: mesh.Meta{Endpoint: strings.Repeat("x", 512-len(`{"e":""}`)+1)}, wantErr: "513 bytes encoded, more than memberlist's limit of 512 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.meta.Encode()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.LessOrEqual(t, len(b), mesh.MaxMetaSize)
			got, err := mesh.DecodeMeta(b)
			require.NoError(t, err)
			require.Equal(t, tc.meta, got)
		})
	}

	t.Run("compact", func(t *testing.T) {
		b, err := mesh.Meta{Endpoint: "10.0.0.7:9480", Zone: "z"}.Encode()
		require.NoError(t, err)
		require.JSONEq(t, `{"e":"10.0.0.7:9480","z":"z"}`, string(b))
	})

	t.Run("decode", func(t *testing.T) {
		got, err := mesh.DecodeMeta([]byte(`{"e":"h:1","new":"ignored"}`))
		require.NoError(t, err)
		require.Equal(t, mesh.Meta{Endpoint: "h:1"}, got)
		got, err = mesh.DecodeMeta(nil)
		require.NoError(t, err)
		require.Equal(t, mesh.Meta{}, got)
		_, err = mesh.DecodeMeta([]byte("not json"))
		require.ErrorContains(t, err, "decoding mesh metadata")
	})
}

func TestLoadKey(t *testing.T) {
	raw32 := []byte{0x00, 0xff, 0x10, 0x0a, 0x20, 0x3d, 0x80, 0x7f, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
		0x09, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0, 0xfe, 0xfd, 0xfc}
	tests := []struct {
		name    string
		content []byte
		want    []byte
		wantErr string
	}{
		{name: "raw 32", content: raw32, want: raw32},
		{name: "raw 24", content: raw32[:24], want: raw32[:24]},
		{name: "raw 16", content: raw32[:16], want: raw32[:16]},
		{name: "base64 32 with newline", content: []byte(base64.StdEncoding.EncodeToString(raw32) + "\n"), want: raw32},
		{name: "base64 16", content: []byte(base64.StdEncoding.EncodeToString(raw32[:16])), want: raw32[:16]},
		{name: "raw url base64 24", content: []byte(base64.RawURLEncoding.EncodeToString(raw32[:24])), want: raw32[:24]},
		{name: "empty", content: nil, wantErr: "holds 0 bytes: want a raw AES key of 16, 24 or 32 bytes, or such a key base64-encoded"},
		{name: "wrong raw size", content: raw32[:20], wantErr: "holds 20 bytes"},
		{name: "base64 of wrong size", content: []byte(base64.StdEncoding.EncodeToString(raw32[:8])), wantErr: "holds 12 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			require.NoError(t, os.WriteFile(path, tc.content, 0o600))
			got, err := mesh.LoadKey(path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.ErrorContains(t, err, path)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent")
		_, err := mesh.LoadKey(path)
		require.ErrorContains(t, err, "reading mesh key file "+path)
	})
}
