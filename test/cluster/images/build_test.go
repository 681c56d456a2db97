package images

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"
)

// writeModule writes a module with a main package printing msg into dir.
func writeModule(t *testing.T, dir, msg string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/hello\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { println(\""+msg+"\") }\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "lib"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lib", "lib.go"), []byte("package lib\n"), 0o644))
}

func TestBuildGoBinary(t *testing.T) {
	mod := t.TempDir()
	writeModule(t, mod, "one")
	t.Chdir(mod)
	cache := t.TempDir()

	first, err := BuildGoBinary(t.Context(), ".", runtime.GOARCH, "", cache)
	require.NoError(t, err)
	firstInfo, err := os.Stat(first)
	require.NoError(t, err)
	require.Regexp(t, `^hello-linux-`+runtime.GOARCH+`-[0-9a-f]{16}$`, filepath.Base(first))

	tests := []struct {
		name         string
		pkg          string
		goarch       string
		goarm        string
		edit         string // new message for main.go, if any
		wantSame     bool   // the first binary is returned, not rebuilt
		wantPlatform v1.Platform
		wantErr      string
	}{
		{name: "cached", pkg: ".", goarch: runtime.GOARCH, wantSame: true, wantPlatform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}},
		{name: "by import path", pkg: "example.com/hello", goarch: runtime.GOARCH, wantSame: true, wantPlatform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}},
		{name: "other arch", pkg: ".", goarch: "arm", goarm: "7", wantPlatform: v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
		{name: "source changed", pkg: ".", goarch: runtime.GOARCH, edit: "two", wantPlatform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}},
		{name: "not a main package", pkg: "./lib", goarch: runtime.GOARCH, wantErr: "not a main package"},
		{name: "no such package", pkg: "./missing", goarch: runtime.GOARCH, wantErr: "go list -json ./missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.edit != "" {
				writeModule(t, mod, tt.edit)
			}
			got, err := BuildGoBinary(t.Context(), tt.pkg, tt.goarch, tt.goarm, cache)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			info, err := os.Stat(got)
			require.NoError(t, err)
			require.NotZero(t, info.Mode()&0o111, "not executable")
			if tt.wantSame {
				require.Equal(t, first, got)
				require.Equal(t, firstInfo.ModTime(), info.ModTime())
			} else {
				require.NotEqual(t, first, got)
			}
			if tt.edit != "" {
				require.NoFileExists(t, first, "the binary of the old sources is removed")
			}
			platform, err := elfPlatform(got)
			require.NoError(t, err)
			require.Equal(t, tt.wantPlatform, platform)
		})
	}
}
