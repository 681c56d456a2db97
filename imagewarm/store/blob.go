package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/shoal-io/shoal/internal/fsutil"
)

// entry is the store's state for one digest, shared by all its handles.
//
// Lock order: commitMu, then persistMu, then Store.mu, then mu.
type entry struct {
	digest v1.Hash
	size   int64

	// Guarded by Store.mu.
	refs     int
	lastUse  uint64
	released bool

	// commitMu serializes Commit and SetPieceHashes.
	commitMu sync.Mutex
	// persistMu serializes pieces-file writes, so that a later write
	// always carries a later bitmap.
	persistMu sync.Mutex
	// savedVer is the bitsVer the pieces file holds (guarded by
	// persistMu): a write that another one already covered is skipped.
	savedVer uint64

	pieceSize int64 // fixed for the entry's life, like size

	mu       sync.RWMutex
	verified bool
	bits     Bitmap     // pieces present (all, once verified)
	writing  Bitmap     // pieces a WritePiece is writing
	sums     []PieceSum // sha256 of each piece, where sumKnown
	sumKnown Bitmap
	trusted  []PieceSum // published piece hashes; nil when unknown
	gen      uint64     // incremented when present pieces are dropped
	bitsVer  uint64     // incremented whenever bits change
	gone     bool       // removed: waiters give up
	changed  chan struct{}
	f        *os.File // open while refs > 0

	// prefixMu guards the running digest: a sha256 over pieces [0,
	// prefixN) as they were written, valid while gen is prefixGen, so
	// that Commit hashes only what it has not seen instead of reading the
	// whole blob back at the end.
	prefixMu  sync.Mutex
	prefix    hash.Hash
	prefixN   int
	prefixGen uint64
}

// maxCatchUp bounds the present pieces one WritePiece reads back to
// extend the running digest past a piece that arrived out of order.
const maxCatchUp = 4

func newPartialEntry(d v1.Hash, size, pieceSize int64) *entry {
	n := numPieces(size, pieceSize)
	return &entry{
		digest: d, size: size, pieceSize: pieceSize,
		bits: NewBitmap(n), writing: NewBitmap(n), sums: make([]PieceSum, n), sumKnown: NewBitmap(n),
		changed: make(chan struct{}),
	}
}

func newVerifiedEntry(d v1.Hash, size, pieceSize int64) *entry {
	e := newPartialEntry(d, size, pieceSize)
	e.verified = true
	e.bits = fullBitmap(e.bits.Len())
	return e
}

func fullBitmap(n int) Bitmap {
	b := NewBitmap(n)
	for i := range n {
		b.Set(i)
	}
	return b
}

// broadcastLocked wakes every waiter; e.mu must be held for writing.
func (e *entry) broadcastLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// holding describes e; Store.mu must be held.
func (e *entry) holding() Holding {
	e.mu.RLock()
	defer e.mu.RUnlock()
	h := Holding{Digest: e.digest, Size: e.size, PieceSize: e.pieceSize, Verified: e.verified}
	if !e.verified {
		h.Bitmap = e.bits.Clone()
	}
	return h
}

// pieceSpan returns the offset and length of piece i.
func (e *entry) pieceSpan(i int) (int64, int64) {
	off := int64(i) * e.pieceSize
	return off, min(e.pieceSize, e.size-off)
}

// Blob is a handle on one blob of a Store, complete or partial. Handles on
// the same digest share its state: any number of goroutines may read while
// others write pieces. Close must be called once the handle is no longer
// needed, and not concurrently with its other methods.
type Blob struct {
	s      *Store
	e      *entry
	closed atomic.Bool
}

// Digest returns the blob's digest.
func (b *Blob) Digest() v1.Hash { return b.e.digest }

// Size returns the blob's size in bytes.
func (b *Blob) Size() int64 { return b.e.size }

// PieceSize returns the size of every piece but the last.
func (b *Blob) PieceSize() int64 {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return b.e.pieceSize
}

// NumPieces returns the number of pieces.
func (b *Blob) NumPieces() int {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return b.e.bits.Len()
}

// Verified reports whether the blob is complete and its digest checked.
func (b *Blob) Verified() bool {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return b.e.verified
}

// Complete reports whether every piece is present (verified or not).
func (b *Blob) Complete() bool {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return b.e.verified || b.e.bits.Full()
}

// Have reports whether piece i is present; false when out of range.
func (b *Blob) Have(i int) bool {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return i >= 0 && i < b.e.bits.Len() && b.e.bits.Has(i)
}

// Bitmap returns a copy of the pieces present.
func (b *Blob) Bitmap() Bitmap {
	b.e.mu.RLock()
	defer b.e.mu.RUnlock()
	return b.e.bits.Clone()
}

// HasRange reports whether the bytes [off, off+n) lie within the blob and
// in pieces that are present.
func (b *Blob) HasRange(off, n int64) bool {
	e := b.e
	if off < 0 || n < 0 || off+n > e.size {
		return false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.missingInLocked(off, off+n) < 0
}

// missingInLocked returns the first missing piece holding a byte of
// [off, end), or -1; e.mu must be held.
func (e *entry) missingInLocked(off, end int64) int {
	if e.verified || off >= end {
		return -1
	}
	lo, hi := int(off/e.pieceSize), int((end-1)/e.pieceSize)+1
	if m := e.bits.NextMissing(lo); m >= 0 && m < hi {
		return m
	}
	return -1
}

// WritePiece stores piece i. data must be the whole piece: PieceSize bytes,
// fewer for the last one. Writing a piece already present does nothing
// (several peers may deliver the same piece in endgame); a write racing
// another write of the same piece waits for it. When piece hashes are
// known (SetPieceHashes), a piece that does not match is rejected with a
// *PieceMismatchError. Pieces of one blob may be written concurrently.
// The piece is readable as soon as WritePiece returns, and already while
// its pieces file is being updated; an error updating that file is
// returned, but the piece stays present in memory.
func (b *Blob) WritePiece(i int, data []byte) error {
	if b.closed.Load() {
		return ErrClosed
	}
	e := b.e
	// The geometry never changes for an entry: no lock needed.
	if n := numPieces(e.size, e.pieceSize); i < 0 || i >= n {
		return fmt.Errorf("writing blob %s: %w: piece %d out of range [0,%d)", e.digest, ErrBadPiece, i, n)
	}
	if _, l := e.pieceSpan(i); int64(len(data)) != l {
		return fmt.Errorf("writing blob %s: %w: piece %d has %d bytes, want %d", e.digest, ErrBadPiece, i, len(data), l)
	}
	e.mu.Lock()
	for {
		if e.verified || e.bits.Has(i) {
			e.mu.Unlock()
			return nil
		}
		if !e.writing.Has(i) {
			break
		}
		ch := e.changed
		e.mu.Unlock()
		<-ch
		e.mu.Lock()
	}
	e.writing.Set(i)
	f := e.f
	off, _ := e.pieceSpan(i)
	e.mu.Unlock()

	sum := sha256.Sum256(data)
	err := writeAndSync(f, data, off, b.s.opts.Sync == SyncPieces)

	e.mu.Lock()
	e.writing.Clear(i)
	if err == nil && e.trusted != nil && e.trusted[i] != sum {
		err = &PieceMismatchError{Digest: e.digest, Piece: i, Want: e.trusted[i], Got: sum}
	} else if err == nil {
		e.bits.Set(i)
		e.bitsVer++
		e.sums[i] = sum
		e.sumKnown.Set(i)
	} else {
		err = fmt.Errorf("writing piece %d of blob %s: %w", i, e.digest, err)
	}
	e.broadcastLocked()
	e.mu.Unlock()
	if err != nil {
		return err
	}
	b.extendPrefix(i, data)
	if err := b.persist(); err != nil {
		return fmt.Errorf("recording piece %d of blob %s: %w", i, e.digest, err)
	}
	return nil
}

// extendPrefix feeds the running digest piece i, just written, when it is
// the next one, then up to maxCatchUp present pieces after it from the
// file. It never waits: when another writer is extending it, that one
// will do, and Commit hashes whatever the running digest has not covered.
func (b *Blob) extendPrefix(i int, data []byte) {
	e := b.e
	if !e.prefixMu.TryLock() {
		return
	}
	defer e.prefixMu.Unlock()
	e.mu.RLock()
	gen, n, f := e.gen, e.bits.Len(), e.f
	e.mu.RUnlock()
	if e.prefix == nil || e.prefixGen != gen {
		e.prefix, e.prefixN, e.prefixGen = sha256.New(), 0, gen
	}
	if i == e.prefixN {
		e.prefix.Write(data)
		e.prefixN++
	}
	for range maxCatchUp {
		if e.prefixN >= n {
			return
		}
		e.mu.RLock()
		next := e.bits.Has(e.prefixN) && e.gen == gen
		e.mu.RUnlock()
		if !next {
			return
		}
		off, l := e.pieceSpan(e.prefixN)
		if _, err := io.Copy(e.prefix, io.NewSectionReader(f, off, l)); err != nil {
			e.prefix = nil // Commit starts over
			return
		}
		e.prefixN++
	}
}

// takePrefix hands Commit the running digest and the pieces it covers
// when it is still valid for gen and every piece it covers has a known
// sum (Commit fills the others' as it hashes them); otherwise a fresh
// digest and 0.
func (e *entry) takePrefix(gen uint64, known Bitmap) (hash.Hash, int) {
	e.prefixMu.Lock()
	defer e.prefixMu.Unlock()
	h, n := e.prefix, e.prefixN
	e.prefix, e.prefixN = nil, 0
	if h == nil || e.prefixGen != gen {
		return sha256.New(), 0
	}
	for i := range n {
		if !known.Has(i) {
			return sha256.New(), 0
		}
	}
	return h, n
}

// writeAndSync writes data at off and, with sync, fdatasyncs the file.
func writeAndSync(f *os.File, data []byte, off int64, sync bool) error {
	if _, err := f.WriteAt(data, off); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// persist replaces the pieces file with the current bitmap. Nothing is
// written once the blob is verified (its partial dir is gone), nor when a
// write queued before this one already carried the current bitmap.
func (b *Blob) persist() error {
	e := b.e
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	e.mu.RLock()
	if e.verified || e.gone || e.bitsVer == e.savedVer {
		e.mu.RUnlock()
		return nil
	}
	pf := piecesFile{e.size, e.pieceSize, e.bits.Clone()}
	ver := e.bitsVer
	e.mu.RUnlock()
	if err := fsutil.WriteFile(b.s.partialPath(e.digest, piecesName), pf.encode(), b.s.opts.Sync == SyncPieces); err != nil {
		return err
	}
	e.savedVer = ver
	return nil
}

// ReadAt implements io.ReaderAt. On a partial blob every piece the read
// touches must be present, else it returns a *PieceMissingError (matching
// ErrPieceMissing) and reads nothing.
func (b *Blob) ReadAt(p []byte, off int64) (int, error) {
	if b.closed.Load() {
		return 0, ErrClosed
	}
	e := b.e
	if off < 0 {
		return 0, fmt.Errorf("reading blob %s: negative offset %d", e.digest, off)
	}
	if off >= e.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	end, short := off+int64(len(p)), false
	if end > e.size {
		end, short = e.size, true
	}
	e.mu.RLock()
	if m := e.missingInLocked(off, end); m >= 0 {
		e.mu.RUnlock()
		return 0, &PieceMissingError{Digest: e.digest, Piece: m}
	}
	f := e.f
	e.mu.RUnlock()
	n, err := f.ReadAt(p[:end-off], off)
	switch {
	case err == nil && short:
		err = io.EOF
	case err != nil && !errors.Is(err, io.EOF):
		err = fmt.Errorf("reading blob %s at %d: %w", e.digest, off, err)
	}
	return n, err
}

// ReadPiece returns the content of piece i, which must be present.
func (b *Blob) ReadPiece(i int) ([]byte, error) {
	e := b.e
	e.mu.RLock()
	n := e.bits.Len()
	e.mu.RUnlock()
	if i < 0 || i >= n {
		return nil, fmt.Errorf("reading blob %s: %w: piece %d out of range [0,%d)", e.digest, ErrBadPiece, i, n)
	}
	off, l := e.pieceSpan(i)
	buf := make([]byte, l)
	if _, err := b.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}

// WaitPiece blocks until piece i is present (or the blob verified), ctx
// ends (its error is returned, wrapped), or the blob is removed from the
// store (ErrRemoved).
func (b *Blob) WaitPiece(ctx context.Context, i int) error {
	e := b.e
	for {
		e.mu.RLock()
		switch {
		case e.verified:
			e.mu.RUnlock()
			return nil
		case i < 0 || i >= e.bits.Len():
			n := e.bits.Len()
			e.mu.RUnlock()
			return fmt.Errorf("waiting on blob %s: %w: piece %d out of range [0,%d)", e.digest, ErrBadPiece, i, n)
		case e.bits.Has(i):
			e.mu.RUnlock()
			return nil
		case e.gone:
			e.mu.RUnlock()
			return fmt.Errorf("waiting for piece %d of blob %s: %w", i, e.digest, ErrRemoved)
		}
		ch := e.changed
		e.mu.RUnlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for piece %d of blob %s: %w", i, e.digest, context.Cause(ctx))
		}
	}
}

// NewReader returns a reader of the bytes [off, off+n) (clamped to the
// blob) that streams a blob while it downloads (cut-through): each Read
// waits for the piece it needs, at most stall (0: no bound other than
// ctx), and fails with ErrStalled when it does not come. If present pieces
// are dropped while reading (a digest mismatch reset the blob, or
// SetPieceHashes rejected pieces), Read fails with ErrReset.
func (b *Blob) NewReader(ctx context.Context, off, n int64, stall time.Duration) io.Reader {
	e := b.e
	off = max(0, min(off, e.size))
	end := off + max(0, min(n, e.size-off))
	e.mu.RLock()
	gen := e.gen
	e.mu.RUnlock()
	return &streamReader{b: b, ctx: ctx, off: off, end: end, stall: stall, gen: gen}
}

// streamReader is NewReader's reader.
type streamReader struct {
	b        *Blob
	ctx      context.Context
	off, end int64
	stall    time.Duration
	gen      uint64
}

// Read implements io.Reader.
func (r *streamReader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	e := r.b.e
	i := int(r.off / e.pieceSize)
	if err := r.checkGen(); err != nil {
		return 0, err
	}
	if !r.b.Have(i) {
		ctx, cancel := r.ctx, context.CancelFunc(func() {})
		if r.stall > 0 {
			ctx, cancel = context.WithTimeoutCause(r.ctx, r.stall, ErrStalled)
		}
		err := r.b.WaitPiece(ctx, i)
		cancel()
		if err != nil {
			return 0, err
		}
	}
	if err := r.checkGen(); err != nil {
		return 0, err
	}
	limit := r.end
	if !r.b.Verified() {
		limit = min(limit, (int64(i)+1)*e.pieceSize)
	}
	if int64(len(p)) > limit-r.off {
		p = p[:limit-r.off]
	}
	n, err := r.b.ReadAt(p, r.off)
	r.off += int64(n)
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil
	}
	return n, err
}

// checkGen fails with ErrReset once pieces were dropped from an
// unverified blob since the reader was created.
func (r *streamReader) checkGen() error {
	e := r.b.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if !e.verified && e.gen != r.gen {
		return fmt.Errorf("streaming blob %s: %w", e.digest, ErrReset)
	}
	return nil
}

// Commit verifies a complete blob: it hashes the content and, if the
// sha256 matches the digest, moves it to the verified blobs, computing
// PieceHashes on the way. On a mismatch it drops every piece (and any
// piece hashes), so the blob can be fetched again, and returns a
// *DigestMismatchError (matching ErrDigestMismatch); readers streaming the
// blob fail with ErrReset. Committing a verified blob does nothing; a blob
// with missing pieces returns ErrIncomplete.
func (b *Blob) Commit() error {
	if b.closed.Load() {
		return ErrClosed
	}
	e, s := b.e, b.s
	e.commitMu.Lock()
	defer e.commitMu.Unlock()

	e.mu.RLock()
	if e.verified {
		e.mu.RUnlock()
		return nil
	}
	if !e.bits.Full() {
		missing := e.bits.Len() - e.bits.Count()
		e.mu.RUnlock()
		return fmt.Errorf("committing blob %s: %w: %d of %d pieces missing", e.digest, ErrIncomplete, missing, e.bits.Len())
	}
	f, n, gen := e.f, e.bits.Len(), e.gen
	known, sums := e.sumKnown.Clone(), slices.Clone(e.sums)
	e.mu.RUnlock()

	full, from := e.takePrefix(gen, known)
	got, err := hashPieces(f, e, full, from, n, known, sums)
	if err != nil {
		return fmt.Errorf("committing blob %s: %w", e.digest, err)
	}
	if got != e.digest {
		if err := b.reset(f); err != nil {
			return fmt.Errorf("committing blob %s: content has digest %s; resetting: %w", e.digest, got, err)
		}
		return &DigestMismatchError{Digest: e.digest, Got: got}
	}
	sync := s.opts.Sync == SyncPieces
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("committing blob %s: %w", e.digest, err)
		}
	}

	e.persistMu.Lock()
	s.mu.Lock()
	err = os.Rename(s.partialPath(e.digest, dataFile), s.blobPath(e.digest))
	if err == nil {
		e.mu.Lock()
		e.verified = true
		e.sums, e.sumKnown = sums, fullBitmap(n)
		e.trusted = nil
		e.broadcastLocked()
		e.mu.Unlock()
		s.touchLocked(e)
		err = os.RemoveAll(filepath.Dir(s.partialPath(e.digest, dataFile)))
	}
	s.mu.Unlock()
	e.persistMu.Unlock()
	if err == nil && sync {
		if err = fsutil.SyncDir(filepath.Join(s.root, blobsDir, algoDir)); err == nil {
			err = fsutil.SyncDir(filepath.Join(s.root, partialDir, algoDir))
		}
	}
	if err != nil {
		return fmt.Errorf("committing blob %s: %w", e.digest, err)
	}
	return nil
}

// hashPieces reads pieces [from, n) of e from f into full, which holds
// the earlier ones already, and returns the blob's digest, filling sums[i]
// for every piece it reads that is not in known.
func hashPieces(f *os.File, e *entry, full hash.Hash, from, n int, known Bitmap, sums []PieceSum) (v1.Hash, error) {
	buf := make([]byte, min(e.pieceSize, 1<<20))
	var ph hash.Hash
	for i := from; i < n; i++ {
		off, l := e.pieceSpan(i)
		w := io.Writer(full)
		if !known.Has(i) {
			if ph == nil {
				ph = sha256.New()
			}
			ph.Reset()
			w = io.MultiWriter(full, ph)
		}
		if _, err := io.CopyBuffer(w, io.NewSectionReader(f, off, l), buf); err != nil {
			return v1.Hash{}, err
		}
		if !known.Has(i) {
			ph.Sum(sums[i][:0])
		}
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(full.Sum(nil))}, nil
}

// reset drops every piece of a partial blob whose content was rejected.
func (b *Blob) reset(f *os.File) error {
	e := b.e
	// Every piece is present, so no WritePiece touches the file while it
	// is zeroed; only then are the pieces marked missing.
	err := f.Truncate(0)
	if err == nil {
		err = f.Truncate(e.size)
	}
	e.mu.Lock()
	n := e.bits.Len()
	e.bits, e.sumKnown = NewBitmap(n), NewBitmap(n)
	e.trusted = nil
	e.gen++
	e.bitsVer++
	e.broadcastLocked()
	e.mu.Unlock()
	if rerr := os.Remove(b.s.partialPath(e.digest, hashesName)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	if perr := b.persist(); err == nil {
		err = perr
	}
	return err
}

// SetPieceHashes gives the blob the piece hashes another node published
// after verifying it. They must be for the blob's piece size. Pieces
// already present are checked: those that do not match are dropped and
// returned (the caller blacklists their sources). From then on WritePiece
// rejects pieces that do not match. The hashes are kept across restarts.
// On a verified blob it does nothing.
func (b *Blob) SetPieceHashes(h PieceHashes) ([]int, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	e := b.e
	e.commitMu.Lock()
	defer e.commitMu.Unlock()
	e.mu.RLock()
	if e.verified {
		e.mu.RUnlock()
		return nil, nil
	}
	if h.PieceSize != e.pieceSize || len(h.Sums) != e.bits.Len() {
		ps, n := e.pieceSize, e.bits.Len()
		e.mu.RUnlock()
		return nil, fmt.Errorf("setting piece hashes of blob %s: got %d sums for %d-byte pieces, blob has %d pieces of %d bytes",
			e.digest, len(h.Sums), h.PieceSize, n, ps)
	}
	present, known, sums := e.bits.Clone(), e.sumKnown.Clone(), slices.Clone(e.sums)
	e.mu.RUnlock()

	var bad []int
	for i := range present.All() {
		sum := sums[i]
		if !known.Has(i) {
			data, err := b.ReadPiece(i)
			if err != nil {
				return nil, fmt.Errorf("setting piece hashes of blob %s: %w", e.digest, err)
			}
			sum = sha256.Sum256(data)
		}
		if sum != h.Sums[i] {
			bad = append(bad, i)
		}
	}
	raw, _ := h.MarshalBinary()
	if err := fsutil.WriteFile(b.s.partialPath(e.digest, hashesName), raw, b.s.opts.Sync == SyncPieces); err != nil {
		return nil, fmt.Errorf("setting piece hashes of blob %s: %w", e.digest, err)
	}
	e.mu.Lock()
	e.trusted = slices.Clone(h.Sums)
	for _, i := range bad {
		e.bits.Clear(i)
		e.sumKnown.Clear(i)
	}
	if len(bad) > 0 {
		e.gen++
		e.bitsVer++
	}
	e.broadcastLocked()
	e.mu.Unlock()
	if len(bad) > 0 {
		if err := b.persist(); err != nil {
			return bad, fmt.Errorf("setting piece hashes of blob %s: %w", e.digest, err)
		}
	}
	return bad, nil
}

// PieceHashes returns the sha256 of every piece of a verified blob, for
// publishing. They are computed by Commit, or on first call for a blob
// found at Open (in Options.PieceSize pieces). Before verification it
// returns ErrNotVerified: hashes of unverified pieces prove nothing.
func (b *Blob) PieceHashes() (PieceHashes, error) {
	if b.closed.Load() {
		return PieceHashes{}, ErrClosed
	}
	e := b.e
	e.mu.RLock()
	if !e.verified {
		e.mu.RUnlock()
		return PieceHashes{}, fmt.Errorf("piece hashes of blob %s: %w", e.digest, ErrNotVerified)
	}
	if e.sumKnown.Full() {
		h := PieceHashes{PieceSize: e.pieceSize, Sums: slices.Clone(e.sums)}
		e.mu.RUnlock()
		return h, nil
	}
	f, n := e.f, e.bits.Len()
	known, sums := e.sumKnown.Clone(), slices.Clone(e.sums)
	e.mu.RUnlock()
	if _, err := hashPieces(f, e, sha256.New(), 0, n, known, sums); err != nil {
		return PieceHashes{}, fmt.Errorf("piece hashes of blob %s: %w", e.digest, err)
	}
	e.mu.Lock()
	e.sums, e.sumKnown = sums, fullBitmap(n)
	e.mu.Unlock()
	return PieceHashes{PieceSize: e.pieceSize, Sums: slices.Clone(sums)}, nil
}

// Close releases the handle. The last handle on a blob closes its file;
// a blob that was Released is then deleted, and the quota is enforced
// again (blobs in use cannot be evicted). Closing twice does nothing.
func (b *Blob) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	return b.s.release(b.e)
}
