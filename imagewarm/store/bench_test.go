package store

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkPieceWriteCommit writes a 64 MiB blob as 4 MiB pieces (each
// hashed on arrival and recorded in the bitmap file) and commits it (a
// full sha256 pass and a rename), against plain os.File writes of the same
// bytes in the same run. Compare the MB/s columns: sync=none with
// baseline=os.File-write, sync=pieces with baseline=os.File-write+fsync.
func BenchmarkPieceWriteCommit(b *testing.B) {
	const size = 64 << 20
	const ps = DefaultPieceSize
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(data)
	d := digestOf(data)

	for _, fsync := range []bool{false, true} {
		name := "baseline=os.File-write"
		if fsync {
			name += "+fsync"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "blob")
			b.SetBytes(size)
			for b.Loop() {
				f, err := os.Create(path)
				require.NoError(b, err)
				_, err = f.Write(data)
				require.NoError(b, err)
				if fsync {
					require.NoError(b, f.Sync())
				}
				require.NoError(b, f.Close())
				require.NoError(b, os.Remove(path))
			}
		})
	}

	for _, tc := range []struct {
		name    string
		sync    SyncPolicy
		writers int
	}{
		{"store/sync=none", SyncNone, 1},
		{"store/sync=none,writers=2", SyncNone, 2},
		{"store/sync=pieces", SyncPieces, 1},
		{"store/sync=pieces,writers=2", SyncPieces, 2},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := openStore(b, "", Options{PieceSize: ps, Sync: tc.sync})
			b.SetBytes(size)
			for b.Loop() {
				bl, err := s.Begin(d, size, 0)
				require.NoError(b, err)
				var wg sync.WaitGroup
				for w := range tc.writers {
					wg.Go(func() {
						for i := w; i < bl.NumPieces(); i += tc.writers {
							if err := bl.WritePiece(i, data[i*ps:(i+1)*ps]); err != nil {
								b.Error(err)
							}
						}
					})
				}
				wg.Wait()
				require.NoError(b, bl.Commit())
				require.NoError(b, bl.Close())
				require.NoError(b, s.Delete(d))
			}
		})
	}
}

// BenchmarkCommit times Commit alone on a 64 MiB blob of 1 MiB pieces
// written in order, where it continues the running digest WritePiece kept,
// against the same blob written in reverse, where it reads nearly all of
// it back (what every Commit did before the running digest).
func BenchmarkCommit(b *testing.B) {
	const size = 64 << 20
	const ps = 1 << 20
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{3}).Read(data)
	d := digestOf(data)
	for _, order := range []string{"baseline=reverse", "in-order"} {
		b.Run(order, func(b *testing.B) {
			s := openStore(b, "", Options{PieceSize: ps})
			b.SetBytes(size)
			for b.Loop() {
				b.StopTimer()
				bl, err := s.Begin(d, size, 0)
				require.NoError(b, err)
				for k := range bl.NumPieces() {
					i := k
					if order != "in-order" {
						i = bl.NumPieces() - 1 - k
					}
					require.NoError(b, bl.WritePiece(i, data[i*ps:(i+1)*ps]))
				}
				b.StartTimer()
				require.NoError(b, bl.Commit())
				b.StopTimer()
				require.NoError(b, bl.Close())
				require.NoError(b, s.Delete(d))
				b.StartTimer()
			}
		})
	}
}
