package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/shoal-io/shoal/internal/fsutil"
)

// testPiece is the piece size of most tests: small, so blobs have many
// pieces, and not a power of two.
const testPiece = 1000

// blob returns size deterministic random bytes and their digest.
func blob(seed uint64, size int) ([]byte, v1.Hash) {
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data, digestOf(data)
}

func digestOf(data []byte) v1.Hash {
	sum := sha256.Sum256(data)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// piece returns piece i of data.
func piece(data []byte, ps, i int) []byte {
	return data[i*ps : min(len(data), (i+1)*ps)]
}

func openStore(t testing.TB, root string, o Options) *Store {
	t.Helper()
	if root == "" {
		root = t.TempDir()
	}
	if o.PieceSize == 0 {
		o.PieceSize = testPiece
	}
	s, err := Open(root, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func closeBlob(t testing.TB, b *Blob) {
	t.Helper()
	require.NoError(t, b.Close())
}

// writeAll writes every piece of data into b in a shuffled order.
func writeAll(t testing.TB, b *Blob, data []byte, seed uint64) {
	t.Helper()
	ps := int(b.PieceSize())
	order := rand.New(rand.NewPCG(seed, 7)).Perm(b.NumPieces())
	for _, i := range order {
		require.NoError(t, b.WritePiece(i, piece(data, ps, i)))
	}
}

// put stores data as a verified blob.
func put(t testing.TB, s *Store, data []byte) v1.Hash {
	t.Helper()
	d := digestOf(data)
	b, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer closeBlob(t, b)
	writeAll(t, b, data, 1)
	require.NoError(t, b.Commit())
	return d
}

func TestWriteCommitRead(t *testing.T) {
	for _, size := range []int{0, 1, testPiece - 1, testPiece, testPiece + 1, 5*testPiece + 17} {
		t.Run("size="+strconv.Itoa(size), func(t *testing.T) {
			s := openStore(t, "", Options{})
			data, d := blob(uint64(size), size)
			b, err := s.Begin(d, int64(size), 0)
			require.NoError(t, err)
			defer closeBlob(t, b)
			n := (size + testPiece - 1) / testPiece
			require.Equal(t, n, b.NumPieces())
			require.Equal(t, size == 0, b.Complete())
			_, err = b.PieceHashes()
			require.ErrorIs(t, err, ErrNotVerified)

			writeAll(t, b, data, 3)
			require.True(t, b.Complete())
			require.False(t, b.Verified())
			require.NoError(t, b.Commit())
			require.True(t, b.Verified())
			require.NoError(t, b.Commit(), "Commit of a verified blob is a no-op")

			got := make([]byte, size)
			k, err := b.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, size, k)
			require.Equal(t, data, got)
			onDisk, err := os.ReadFile(filepath.Join(s.Root(), "blobs", "sha256", d.Hex))
			require.NoError(t, err)
			require.Equal(t, data, onDisk)
			require.NoDirExists(t, filepath.Join(s.Root(), "partial", "sha256", d.Hex))

			ph, err := b.PieceHashes()
			require.NoError(t, err)
			require.Equal(t, int64(testPiece), ph.PieceSize)
			require.Len(t, ph.Sums, n)
			for i := range n {
				require.Equal(t, PieceSum(sha256.Sum256(piece(data, testPiece, i))), ph.Sums[i], "piece %d", i)
			}
			raw, err := ph.MarshalBinary()
			require.NoError(t, err)
			var back PieceHashes
			require.NoError(t, back.UnmarshalBinary(raw))
			require.Equal(t, ph, back)

			h := s.Holdings()
			require.Len(t, h, 1)
			require.True(t, h[0].Verified)
			require.Equal(t, int64(size), h[0].Size)
			require.Zero(t, h[0].Bitmap.Len(), "a verified holding carries no bitmap")
		})
	}
}

func TestReadAtRules(t *testing.T) {
	s := openStore(t, "", Options{})
	data, d := blob(1, 3*testPiece+500)
	b, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer closeBlob(t, b)
	require.NoError(t, b.WritePiece(1, piece(data, testPiece, 1)))
	require.NoError(t, b.WritePiece(3, piece(data, testPiece, 3)))

	for _, tc := range []struct {
		name    string
		off, n  int64
		missing int // -1: readable
		eof     bool
	}{
		{"inside a present piece", 1100, 200, -1, false},
		{"whole present piece", 1000, 1000, -1, false},
		{"spans into a missing piece", 1900, 200, 2, false},
		{"starts in a missing piece", 0, 10, 0, false},
		{"last piece to the end", 3000, 500, -1, false},
		{"past the end", 3400, 200, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.n)
			k, err := b.ReadAt(buf, tc.off)
			if tc.missing >= 0 {
				var pm *PieceMissingError
				require.ErrorAs(t, err, &pm)
				require.ErrorIs(t, err, ErrPieceMissing)
				require.Equal(t, tc.missing, pm.Piece)
				require.Zero(t, k)
				require.False(t, b.HasRange(tc.off, tc.n))
				return
			}
			end := min(tc.off+tc.n, int64(len(data)))
			require.Equal(t, int(end-tc.off), k)
			require.Equal(t, data[tc.off:end], buf[:k])
			if tc.eof {
				require.ErrorIs(t, err, io.EOF)
			} else {
				require.NoError(t, err)
				require.True(t, b.HasRange(tc.off, tc.n))
			}
		})
	}
	p, err := b.ReadPiece(3)
	require.NoError(t, err)
	require.Equal(t, piece(data, testPiece, 3), p)
	_, err = b.ReadPiece(0)
	require.ErrorIs(t, err, ErrPieceMissing)
	_, err = b.ReadPiece(4)
	require.ErrorIs(t, err, ErrBadPiece)
}

func TestWritePieceValidation(t *testing.T) {
	s := openStore(t, "", Options{})
	data, d := blob(2, 2*testPiece+10)
	b, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer closeBlob(t, b)
	for _, tc := range []struct {
		name string
		i    int
		data []byte
	}{
		{"negative index", -1, piece(data, testPiece, 0)},
		{"index past the end", 3, piece(data, testPiece, 0)},
		{"short piece", 0, piece(data, testPiece, 0)[:10]},
		{"last piece too long", 2, piece(data, testPiece, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, b.WritePiece(tc.i, tc.data), ErrBadPiece)
		})
	}
	t.Run("rewrite of a present piece is ignored", func(t *testing.T) {
		require.NoError(t, b.WritePiece(0, piece(data, testPiece, 0)))
		require.NoError(t, b.WritePiece(0, bytes.Repeat([]byte{'x'}, testPiece)))
		got, err := b.ReadPiece(0)
		require.NoError(t, err)
		require.Equal(t, piece(data, testPiece, 0), got)
	})
	t.Run("concurrent writes of one piece", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { require.NoError(t, b.WritePiece(1, piece(data, testPiece, 1))) })
		}
		wg.Wait()
		got, err := b.ReadPiece(1)
		require.NoError(t, err)
		require.Equal(t, piece(data, testPiece, 1), got)
	})
	t.Run("closed handle", func(t *testing.T) {
		b2, err := s.Get(d)
		require.NoError(t, err)
		require.NoError(t, b2.Close())
		require.NoError(t, b2.Close(), "second Close is a no-op")
		require.ErrorIs(t, b2.WritePiece(2, piece(data, testPiece, 2)), ErrClosed)
	})
	t.Run("bad digest", func(t *testing.T) {
		_, err := s.Begin(v1.Hash{Algorithm: "sha512", Hex: d.Hex}, 1, 0)
		require.ErrorContains(t, err, "unsupported digest")
	})
}

// TestResumeAfterReopen simulates an agent restart halfway through a
// download: the store is closed and opened again on the same root.
func TestResumeAfterReopen(t *testing.T) {
	for _, sync := range []SyncPolicy{SyncPieces, SyncNone} {
		t.Run("sync="+strconv.Itoa(int(sync)), func(t *testing.T) {
			root := t.TempDir()
			data, d := blob(3, 7*testPiece+3)
			s, err := Open(root, Options{PieceSize: testPiece, Sync: sync})
			require.NoError(t, err)
			_, err = Open(root, Options{})
			require.ErrorIs(t, err, ErrLocked, "a second store on the same root")

			b, err := s.Begin(d, int64(len(data)), 0)
			require.NoError(t, err)
			for _, i := range []int{0, 2, 3, 7} {
				require.NoError(t, b.WritePiece(i, piece(data, testPiece, i)))
			}
			before := b.Bitmap()
			// A crash mid-write leaves a temp file next to the pieces file.
			require.NoError(t, os.WriteFile(filepath.Join(root, "partial", "sha256", d.Hex, fsutil.TempPrefix+"x"), []byte("junk"), 0o600))
			require.NoError(t, b.Close())
			require.NoError(t, s.Close())

			s = openStore(t, root, Options{Sync: sync})
			h, err := s.Stat(d)
			require.NoError(t, err)
			require.False(t, h.Verified)
			require.True(t, before.Equal(h.Bitmap), "bitmap after restart: %s, before: %s", h.Bitmap, before)
			require.NoFileExists(t, filepath.Join(root, "partial", "sha256", d.Hex, fsutil.TempPrefix+"x"))

			b, err = s.Begin(d, int64(len(data)), 0)
			require.NoError(t, err)
			defer closeBlob(t, b)
			require.True(t, before.Equal(b.Bitmap()))
			for i := range b.Bitmap().Missing() {
				require.NoError(t, b.WritePiece(i, piece(data, testPiece, i)))
			}
			require.NoError(t, b.Commit(), "resumed pieces (hashed again at commit) and new ones make the blob")
			ph, err := b.PieceHashes()
			require.NoError(t, err)
			require.Equal(t, PieceSum(sha256.Sum256(piece(data, testPiece, 2))), ph.Sums[2], "sum of a piece written before the restart")
		})
	}
}

func TestReopen(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, Options{PieceSize: testPiece})
	require.NoError(t, err)
	full, dFull := blob(10, 2500)
	put(t, s, full)
	var partials []v1.Hash
	for seed := range uint64(3) {
		data, d := blob(20+seed, 2500)
		b, err := s.Begin(d, int64(len(data)), 0)
		require.NoError(t, err)
		require.NoError(t, b.WritePiece(0, piece(data, testPiece, 0)))
		require.NoError(t, b.Close())
		partials = append(partials, d)
	}
	require.NoError(t, s.Close())

	dir := func(d v1.Hash) string { return filepath.Join(root, "partial", "sha256", d.Hex) }
	// partials[0]: pieces file corrupt; partials[1]: data file of the wrong
	// size; partials[2]: intact. A leftover partial dir of the complete blob
	// (crash between commit's rename and cleanup) goes too.
	raw, err := os.ReadFile(filepath.Join(dir(partials[0]), "pieces"))
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0xff
	require.NoError(t, os.WriteFile(filepath.Join(dir(partials[0]), "pieces"), raw, 0o600))
	require.NoError(t, os.Truncate(filepath.Join(dir(partials[1]), "data"), 10))
	require.NoError(t, os.MkdirAll(dir(dFull), 0o700))

	s = openStore(t, root, Options{})
	var got []string
	for _, h := range s.Holdings() {
		got = append(got, h.Digest.Hex)
		if h.Digest == partials[2] {
			require.Equal(t, 1, h.Bitmap.Count())
		}
	}
	want := []string{dFull.Hex, partials[2].Hex}
	slices.Sort(want)
	require.Equal(t, want, got)
	require.NoDirExists(t, dir(partials[0]))
	require.NoDirExists(t, dir(partials[1]))
	require.NoDirExists(t, dir(dFull))
	b, err := s.Get(dFull)
	require.NoError(t, err)
	defer closeBlob(t, b)
	require.True(t, b.Verified())
	ph, err := b.PieceHashes()
	require.NoError(t, err, "piece hashes of a blob found at Open are computed on demand")
	require.Len(t, ph.Sums, 3)
	require.Equal(t, PieceSum(sha256.Sum256(piece(full, testPiece, 2))), ph.Sums[2])
}

// verifiedPieceHashes returns the piece hashes of data (digest d) as a
// store that verified it publishes them.
func verifiedPieceHashes(t *testing.T, data []byte, d v1.Hash) PieceHashes {
	t.Helper()
	src := openStore(t, "", Options{})
	put(t, src, data)
	sb, err := src.Get(d)
	require.NoError(t, err)
	defer closeBlob(t, sb)
	ph, err := sb.PieceHashes()
	require.NoError(t, err)
	return ph
}

func TestPieceHashes(t *testing.T) {
	data, d := blob(4, 4*testPiece+1)
	ph := verifiedPieceHashes(t, data, d)
	bad := bytes.Clone(piece(data, testPiece, 1))
	bad[0] ^= 1

	t.Run("bad piece rejected on write", func(t *testing.T) {
		root := t.TempDir()
		s := openStore(t, root, Options{})
		b, err := s.Begin(d, int64(len(data)), 0)
		require.NoError(t, err)
		dropped, err := b.SetPieceHashes(ph)
		require.NoError(t, err)
		require.Empty(t, dropped)

		err = b.WritePiece(1, bad)
		var pm *PieceMismatchError
		require.ErrorAs(t, err, &pm)
		require.ErrorIs(t, err, ErrPieceMismatch)
		require.Equal(t, 1, pm.Piece)
		require.Equal(t, ph.Sums[1], pm.Want)
		require.Contains(t, err.Error(), "piece 1")
		require.False(t, b.Have(1))
		require.NoError(t, b.WritePiece(1, piece(data, testPiece, 1)))
		require.True(t, b.Have(1))
		require.NoError(t, b.Close())

		// The hashes survive a restart.
		require.NoError(t, s.Close())
		s = openStore(t, root, Options{})
		b, err = s.Begin(d, int64(len(data)), 0)
		require.NoError(t, err)
		defer closeBlob(t, b)
		require.ErrorIs(t, b.WritePiece(2, bytes.Repeat([]byte{0}, testPiece)), ErrPieceMismatch)
		writeAll(t, b, data, 5)
		require.NoError(t, b.Commit())
	})
	t.Run("present bad pieces dropped when hashes arrive", func(t *testing.T) {
		s := openStore(t, "", Options{})
		b, err := s.Begin(d, int64(len(data)), 0)
		require.NoError(t, err)
		defer closeBlob(t, b)
		require.NoError(t, b.WritePiece(0, piece(data, testPiece, 0)))
		require.NoError(t, b.WritePiece(1, bad))
		require.NoError(t, b.WritePiece(4, piece(data, testPiece, 4)))
		dropped, err := b.SetPieceHashes(ph)
		require.NoError(t, err)
		require.Equal(t, []int{1}, dropped)
		require.Equal(t, []int{0, 4}, slices.Collect(b.Bitmap().All()))
	})
	t.Run("wrong geometry", func(t *testing.T) {
		s := openStore(t, "", Options{})
		b, err := s.Begin(d, int64(len(data)), 2*testPiece)
		require.NoError(t, err)
		defer closeBlob(t, b)
		_, err = b.SetPieceHashes(ph)
		require.ErrorContains(t, err, "pieces")
	})
}

func TestCommitDigestMismatch(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root, Options{})
	data, d := blob(5, 3*testPiece)
	b, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer closeBlob(t, b)

	require.NoError(t, b.WritePiece(0, piece(data, testPiece, 0)))
	require.ErrorIs(t, b.Commit(), ErrIncomplete)

	poisoned := bytes.Clone(data)
	poisoned[testPiece+5] ^= 0x80
	require.NoError(t, b.WritePiece(1, piece(poisoned, testPiece, 1)))
	require.NoError(t, b.WritePiece(2, piece(poisoned, testPiece, 2)))
	stream := b.NewReader(t.Context(), 0, int64(len(data)), 0)
	_, err = stream.Read(make([]byte, 10))
	require.NoError(t, err)

	err = b.Commit()
	var dm *DigestMismatchError
	require.ErrorAs(t, err, &dm)
	require.ErrorIs(t, err, ErrDigestMismatch)
	require.Equal(t, d, dm.Digest)
	require.Equal(t, digestOf(poisoned), dm.Got)
	require.Zero(t, b.Bitmap().Count(), "every piece dropped")
	require.False(t, b.Complete())
	require.False(t, b.Verified())
	_, err = stream.Read(make([]byte, 10))
	require.ErrorIs(t, err, ErrReset, "a reader streaming the rejected content fails")
	h, err := s.Stat(d)
	require.NoError(t, err)
	require.Zero(t, h.Bitmap.Count())
	raw, err := os.ReadFile(filepath.Join(root, "partial", "sha256", d.Hex, "pieces"))
	require.NoError(t, err)
	pf, err := decodePieces(raw)
	require.NoError(t, err)
	require.Zero(t, pf.bits.Count(), "the reset is on disk")

	writeAll(t, b, data, 9)
	require.NoError(t, b.Commit(), "fetched again from honest peers")
}

// TestRunningDigest: WritePiece keeps a running digest over the pieces
// written in order, Commit continues it instead of reading the blob back,
// and any drop of pieces it covered makes Commit start over.
func TestRunningDigest(t *testing.T) {
	data, d := blob(6, 8*testPiece+3)
	ph := verifiedPieceHashes(t, data, d)
	n := numPieces(int64(len(data)), testPiece)
	bad := bytes.Clone(piece(data, testPiece, 2))
	bad[0] ^= 1

	tests := []struct {
		name string
		// write writes every piece of b.
		write func(t *testing.T, b *Blob)
		// covered is how many pieces the running digest covers before
		// Commit.
		covered int
	}{
		{name: "in order", covered: n, write: func(t *testing.T, b *Blob) {
			for i := range n {
				require.NoError(t, b.WritePiece(i, piece(data, testPiece, i)))
			}
		}},
		{name: "reverse", covered: min(n, 1+maxCatchUp), write: func(t *testing.T, b *Blob) {
			for i := n - 1; i >= 0; i-- {
				require.NoError(t, b.WritePiece(i, piece(data, testPiece, i)))
			}
		}},
		{name: "shuffled", covered: -1, write: func(t *testing.T, b *Blob) { writeAll(t, b, data, 3) }},
		{name: "a covered piece dropped by the hashes", covered: maxCatchUp, write: func(t *testing.T, b *Blob) {
			for i := range n {
				p := piece(data, testPiece, i)
				if i == 2 {
					p = bad
				}
				require.NoError(t, b.WritePiece(i, p))
			}
			dropped, err := b.SetPieceHashes(ph)
			require.NoError(t, err)
			require.Equal(t, []int{2}, dropped)
			// The digest covered the bad piece: it starts over, the next
			// write reading back what it can from the first piece on.
			require.NoError(t, b.WritePiece(2, piece(data, testPiece, 2)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, "", Options{})
			b, err := s.Begin(d, int64(len(data)), 0)
			require.NoError(t, err)
			defer closeBlob(t, b)
			tc.write(t, b)
			if tc.covered >= 0 {
				b.e.prefixMu.Lock()
				got := b.e.prefixN
				b.e.prefixMu.Unlock()
				require.Equal(t, tc.covered, got, "pieces the running digest covers")
			}
			require.NoError(t, b.Commit())
			got, err := b.ReadPiece(2)
			require.NoError(t, err)
			require.Equal(t, piece(data, testPiece, 2), got)
		})
	}
}

// TestQuotaEviction checks the eviction order: least recently used
// complete blobs that no handle holds, then idle partial blobs; partial
// blobs in use never.
func TestQuotaEviction(t *testing.T) {
	const size = 1000
	var evicted []v1.Hash
	var mu sync.Mutex
	onEvict := func(d v1.Hash) {
		mu.Lock()
		defer mu.Unlock()
		evicted = append(evicted, d)
	}
	takeEvicted := func() []v1.Hash {
		mu.Lock()
		defer mu.Unlock()
		e := evicted
		evicted = nil
		return e
	}
	root := t.TempDir()
	s := openStore(t, root, Options{QuotaBytes: 4 * size, OnEvict: onEvict})
	var blobs [8][]byte
	var ds [8]v1.Hash
	for i := range blobs {
		blobs[i], ds[i] = blob(100+uint64(i), size)
	}
	for i := range 3 {
		put(t, s, blobs[i]) // 0, 1, 2: complete
	}
	p3, err := s.Begin(ds[3], size, 0) // 3: partial, idle after Close
	require.NoError(t, err)
	require.NoError(t, p3.WritePiece(0, blobs[3][:testPiece]))
	closeBlob(t, p3)
	require.Empty(t, takeEvicted())
	require.Equal(t, Usage{Used: 4 * size, Quota: 4 * size, Verified: 3, Partial: 1}, s.Usage())

	// Use 0: now 1 is the least recently used.
	r0, err := s.Get(ds[0])
	require.NoError(t, err)
	closeBlob(t, r0)

	steps := []struct {
		name  string
		begin int
		want  []v1.Hash
	}{
		{"least recently used complete blob first", 4, []v1.Hash{ds[1]}},
		{"next complete blob by age", 5, []v1.Hash{ds[2]}},
	}
	// 4 and 5 stay open (in use) from here on.
	var open []*Blob
	defer func() {
		for _, b := range open {
			closeBlob(t, b)
		}
	}()
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			b, err := s.Begin(ds[st.begin], size, 0)
			require.NoError(t, err)
			open = append(open, b)
			require.Equal(t, st.want, takeEvicted())
		})
	}
	t.Run("complete blob in use is kept; idle partial goes", func(t *testing.T) {
		r0, err := s.Get(ds[0])
		require.NoError(t, err)
		defer closeBlob(t, r0)
		b, err := s.Begin(ds[6], size, 0)
		require.NoError(t, err)
		open = append(open, b)
		require.Equal(t, []v1.Hash{ds[3]}, takeEvicted())
	})
	t.Run("once released by its reader the complete blob goes", func(t *testing.T) {
		b, err := s.Begin(ds[7], size, 0)
		require.NoError(t, err)
		open = append(open, b)
		require.Equal(t, []v1.Hash{ds[0]}, takeEvicted())
	})
	t.Run("partials in use are never evicted", func(t *testing.T) {
		extra, d := blob(200, size)
		_, err := s.Begin(d, int64(len(extra)), 0)
		require.ErrorIs(t, err, ErrQuotaExceeded)
		require.Empty(t, takeEvicted())
		for _, d := range ds[4:] {
			_, err := s.Stat(d)
			require.NoError(t, err)
		}
	})
}

// TestQuotaOrderSurvivesRestart checks that the LRU order is rebuilt from
// file times at Open.
func TestQuotaOrderSurvivesRestart(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root, Options{PieceSize: testPiece})
	require.NoError(t, err)
	var ds []v1.Hash
	for i := range 3 {
		data, _ := blob(300+uint64(i), 1000)
		ds = append(ds, put(t, s, data))
	}
	require.NoError(t, s.Close())
	t0 := time.Now()
	for i, age := range []time.Duration{time.Minute, time.Hour, time.Second} {
		mt := t0.Add(-age)
		require.NoError(t, os.Chtimes(filepath.Join(root, "blobs", "sha256", ds[i].Hex), mt, mt))
	}
	var evicted []v1.Hash
	s = openStore(t, root, Options{QuotaBytes: 1000, OnEvict: func(d v1.Hash) { evicted = append(evicted, d) }})
	require.Equal(t, []v1.Hash{ds[1], ds[0]}, evicted, "oldest first, at Open")
	require.Equal(t, int64(1000), s.Usage().Used)
}

func TestReleaseAndDelete(t *testing.T) {
	s := openStore(t, "", Options{})
	data, d := blob(6, 2500)

	t.Run("release with a reader defers deletion", func(t *testing.T) {
		put(t, s, data)
		r, err := s.Get(d)
		require.NoError(t, err)
		require.NoError(t, s.Release(d))
		_, err = s.Get(d)
		require.ErrorIs(t, err, ErrNotFound)
		require.Empty(t, s.Holdings())
		require.FileExists(t, filepath.Join(s.Root(), "blobs", "sha256", d.Hex))
		got := make([]byte, len(data))
		_, err = r.ReadAt(got, 0)
		require.NoError(t, err)
		require.Equal(t, data, got)
		require.NoError(t, r.Close())
		require.NoFileExists(t, filepath.Join(s.Root(), "blobs", "sha256", d.Hex))
		require.Zero(t, s.Usage().Used)
		require.NoError(t, s.Release(d), "releasing what is not held")
	})
	t.Run("begin takes a released blob back", func(t *testing.T) {
		put(t, s, data)
		r, err := s.Get(d)
		require.NoError(t, err)
		require.NoError(t, s.Release(d))
		b, err := s.Begin(d, int64(len(data)), 0)
		require.NoError(t, err)
		require.True(t, b.Verified())
		closeBlob(t, r)
		closeBlob(t, b)
		_, err = s.Stat(d)
		require.NoError(t, err)
		require.NoError(t, s.Release(d))
		_, err = s.Stat(d)
		require.ErrorIs(t, err, ErrNotFound)
	})
	t.Run("delete", func(t *testing.T) {
		b, err := s.Begin(d, int64(len(data)), 0)
		require.NoError(t, err)
		require.NoError(t, b.WritePiece(0, piece(data, testPiece, 0)))
		require.ErrorIs(t, s.Delete(d), ErrInUse, "a partial blob in use")
		writeAll(t, b, data, 2)
		require.NoError(t, b.Commit())
		require.NoError(t, s.Delete(d), "a complete blob in use")
		got := make([]byte, len(data))
		_, err = b.ReadAt(got, 0)
		require.NoError(t, err, "the open handle keeps reading")
		require.Equal(t, data, got)
		closeBlob(t, b)
		require.ErrorIs(t, s.Delete(d), ErrNotFound)
	})
}

func TestBeginGeometry(t *testing.T) {
	s := openStore(t, "", Options{})
	data, d := blob(7, 2500)
	b, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	require.NoError(t, b.WritePiece(0, piece(data, testPiece, 0)))
	_, err = s.Begin(d, int64(len(data)), 500)
	require.ErrorIs(t, err, ErrInUse)
	closeBlob(t, b)

	b, err = s.Begin(d, int64(len(data)), 500)
	require.NoError(t, err, "an idle partial with another piece size is restarted")
	defer closeBlob(t, b)
	require.Equal(t, 5, b.NumPieces())
	require.Zero(t, b.Bitmap().Count())
	writeAll(t, b, data, 4)
	require.NoError(t, b.Commit())
	_, err = s.Begin(d, int64(len(data))+1, 0)
	require.ErrorContains(t, err, "descriptor says")
}

// TestConcurrentReadersDuringWrites runs writers and readers on one blob
// at once (run with -race): readers see each piece byte-exact once present
// and never see a missing piece as data.
func TestConcurrentReadersDuringWrites(t *testing.T) {
	s := openStore(t, "", Options{})
	data, d := blob(8, 64*testPiece+123)
	w, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer closeBlob(t, w)
	n := w.NumPieces()

	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			rb, err := s.Get(d)
			if !assertNoError(t, err) {
				return
			}
			defer func() { _ = rb.Close() }()
			rng := rand.New(rand.NewPCG(uint64(r), 0))
			for _, i := range rng.Perm(n) {
				if err := rb.WaitPiece(t.Context(), i); !assertNoError(t, err) {
					return
				}
				got, err := rb.ReadPiece(i)
				if !assertNoError(t, err) || !bytes.Equal(piece(data, testPiece, i), got) {
					t.Errorf("reader %d: piece %d differs", r, i)
					return
				}
				// A random range either reads byte-exact or names a
				// missing piece.
				off := rng.Int64N(int64(len(data)))
				buf := make([]byte, rng.IntN(3*testPiece))
				k, err := rb.ReadAt(buf, off)
				switch {
				case errors.Is(err, ErrPieceMissing):
				case err == nil || errors.Is(err, io.EOF):
					if !bytes.Equal(data[off:off+int64(k)], buf[:k]) {
						t.Errorf("reader %d: range at %d differs", r, off)
						return
					}
				default:
					t.Errorf("reader %d: %v", r, err)
					return
				}
			}
		})
	}
	for wr := range 2 {
		wg.Go(func() {
			for i := wr; i < n; i += 2 {
				if err := w.WritePiece(i, piece(data, testPiece, i)); !assertNoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Commit())
}

// assertNoError reports err as a test error (usable off the test
// goroutine) and returns whether it was nil.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestStreamCutThrough streams a whole blob while its pieces are written
// in reverse order: the reader waits piece by piece and gets every byte.
func TestStreamCutThrough(t *testing.T) {
	s := openStore(t, "", Options{})
	data, d := blob(9, 20*testPiece+1)
	w, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer closeBlob(t, w)

	r, err := s.Get(d)
	require.NoError(t, err)
	defer closeBlob(t, r)
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		got, err := io.ReadAll(r.NewReader(t.Context(), 0, r.Size(), 0))
		done <- result{got, err}
	}()
	for i := w.NumPieces() - 1; i >= 0; i-- {
		require.NoError(t, w.WritePiece(i, piece(data, testPiece, i)))
	}
	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, data, res.data)

	t.Run("range of a verified blob", func(t *testing.T) {
		require.NoError(t, w.Commit())
		got, err := io.ReadAll(r.NewReader(t.Context(), 1500, 4000, time.Nanosecond))
		require.NoError(t, err)
		require.Equal(t, data[1500:5500], got)
	})
}

func TestWaitPieceEnds(t *testing.T) {
	s := openStore(t, "", Options{})
	data, d := blob(11, 3*testPiece)
	b, err := s.Begin(d, int64(len(data)), 0)
	require.NoError(t, err)
	defer closeBlob(t, b)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, b.WaitPiece(ctx, 1), context.Canceled)
	require.ErrorIs(t, b.WaitPiece(t.Context(), 3), ErrBadPiece)

	// A stall bound on a piece that never comes. The bound is real time,
	// but nothing asserts on how long it took.
	_, err = b.NewReader(t.Context(), 0, 10, time.Millisecond).Read(make([]byte, 10))
	require.ErrorIs(t, err, ErrStalled)

	require.NoError(t, b.WritePiece(1, piece(data, testPiece, 1)))
	require.NoError(t, b.WaitPiece(ctx, 1), "a present piece needs no waiting")
}
