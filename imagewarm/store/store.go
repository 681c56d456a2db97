package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/klog/v2"

	"github.com/shoal-io/shoal/internal/fsutil"
)

// DefaultPieceSize is the piece size used when Options.PieceSize and
// Begin's pieceSize are zero: Kraken's 4 MB, the low end of the 4–16 MiB
// range the design recommends.
const DefaultPieceSize = 4 << 20

// SyncPolicy says when the store fsyncs.
type SyncPolicy int

const (
	// SyncPieces (the default) makes the on-disk state crash-consistent:
	// a piece's data is fdatasync'ed before the pieces file that marks it
	// present is replaced, metadata files are fsynced before their rename,
	// and a commit fsyncs the blob and both directories. After a power
	// loss the bitmap never claims a piece whose data did not reach the
	// disk; the most recent pieces may be missing from it and are fetched
	// again.
	SyncPieces SyncPolicy = iota
	// SyncNone never fsyncs. Files are still replaced by rename, so a
	// restart of the agent (the page cache survives) resumes exactly; after
	// a power loss the bitmap may claim pieces whose data was lost, which
	// the full-digest check at Commit catches (the partial is reset and
	// fetched again). For tests, benchmarks and throwaway nodes.
	SyncNone
)

// Options configure a Store.
type Options struct {
	// PieceSize is the default piece size for Begin, and the piece size
	// of complete blobs found at Open (for PieceHashes). 0 means
	// DefaultPieceSize.
	PieceSize int64
	// QuotaBytes bounds the bytes the store holds: complete blobs plus the
	// full declared size of every partial blob (reserved at Begin). When
	// over, the least recently used complete blobs that no handle holds are
	// evicted first, then idle partial blobs; a partial blob with an open
	// handle is never evicted. 0 means no quota.
	QuotaBytes int64
	// Sync is the fsync policy.
	Sync SyncPolicy
	// OnEvict, if set, is called (without locks held, in the goroutine
	// that caused it) for every blob the quota evicted, so that its adverts
	// can be withdrawn.
	OnEvict func(d v1.Hash)
	// Logger receives warnings about state found at Open; the zero value
	// means klog.Background().
	Logger klog.Logger
}

// Holding describes one blob the store holds, for adverts.
type Holding struct {
	// Digest is the blob's digest.
	Digest v1.Hash
	// Size is the blob's size in bytes.
	Size int64
	// PieceSize is the size of every piece but the last.
	PieceSize int64
	// Verified is true for a complete blob whose digest was checked.
	Verified bool
	// Bitmap holds the pieces present; it is empty when Verified (every
	// piece is).
	Bitmap Bitmap
}

// Usage is the store's disk accounting.
type Usage struct {
	// Used counts complete blobs and the declared size of partial blobs.
	Used int64
	// Quota is Options.QuotaBytes (0: none).
	Quota int64
	// Verified and Partial count the blobs of each kind.
	Verified, Partial int
}

// Store is a content-addressed blob store on local disk. It is safe for
// concurrent use.
type Store struct {
	root string
	opts Options
	lock *os.File

	mu      sync.Mutex
	entries map[v1.Hash]*entry
	used    int64
	tick    uint64
	closed  bool
}

const (
	blobsDir   = "blobs"
	partialDir = "partial"
	algoDir    = "sha256"
	dataFile   = "data"
	piecesName = "pieces"
	hashesName = "hashes"
	lockName   = "LOCK"
)

// Open opens (creating it if needed) the store under root and takes an
// exclusive lock on it. Complete blobs and partial blobs left by a previous
// run are indexed; partial blobs whose metadata is unreadable are removed.
func Open(root string, o Options) (*Store, error) {
	if o.PieceSize == 0 {
		o.PieceSize = DefaultPieceSize
	}
	if o.PieceSize < 0 || o.QuotaBytes < 0 {
		return nil, fmt.Errorf("opening blob store %s: negative piece size or quota", root)
	}
	if o.Logger.GetSink() == nil {
		o.Logger = klog.Background()
	}
	for _, d := range []string{filepath.Join(root, blobsDir, algoDir), filepath.Join(root, partialDir, algoDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("opening blob store: %w", err)
		}
	}
	lock, err := lockRoot(filepath.Join(root, lockName))
	if err != nil {
		return nil, err
	}
	s := &Store{root: root, opts: o, lock: lock, entries: map[v1.Hash]*entry{}}
	if err := s.load(); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("opening blob store %s: %w", root, err)
	}
	s.mu.Lock()
	evicted := s.evictLocked(0)
	s.mu.Unlock()
	s.notifyEvicted(evicted)
	return s, nil
}

// lockRoot takes the store's exclusive lock.
func lockRoot(path string) (*os.File, error) {
	f, err := fsutil.Lock(path)
	if errors.Is(err, fsutil.ErrHeld) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("blob store lock: %w", err)
	}
	return f, nil
}

// Close releases the store's lock. Handles already open keep working;
// Begin and Get return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.lock.Close(); err != nil { // closing the fd drops the flock
		return fmt.Errorf("closing blob store lock: %w", err)
	}
	return nil
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

func (s *Store) blobPath(d v1.Hash) string {
	return filepath.Join(s.root, blobsDir, algoDir, d.Hex)
}

func (s *Store) partialPath(d v1.Hash, name string) string {
	return filepath.Join(s.root, partialDir, algoDir, d.Hex, name)
}

// checkDigest accepts sha256 digests with 64 lowercase hex digits.
func checkDigest(d v1.Hash) error {
	if d.Algorithm != "sha256" || !validHex(d.Hex) {
		return fmt.Errorf("unsupported digest %q: want sha256 with 64 lowercase hex digits", d.String())
	}
	return nil
}

func validHex(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// load indexes what a previous run left under root.
func (s *Store) load() error {
	type found struct {
		e     *entry
		mtime time.Time
	}
	var all []found
	log := s.opts.Logger

	blobs := filepath.Join(s.root, blobsDir, algoDir)
	des, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, fsutil.TempPrefix) {
			_ = os.Remove(filepath.Join(blobs, name))
			continue
		}
		if !de.Type().IsRegular() || !validHex(name) {
			log.Info("Ignoring unexpected file in blob store", "path", filepath.Join(blobs, name))
			continue
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		d := v1.Hash{Algorithm: "sha256", Hex: name}
		all = append(all, found{newVerifiedEntry(d, fi.Size(), s.opts.PieceSize), fi.ModTime()})
	}

	partials := filepath.Join(s.root, partialDir, algoDir)
	des, err = os.ReadDir(partials)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, f := range all {
		have[f.e.digest.Hex] = true
	}
	for _, de := range des {
		name := de.Name()
		dir := filepath.Join(partials, name)
		if !de.IsDir() || !validHex(name) || have[name] {
			// A complete copy exists (a crash between commit's rename and
			// cleanup) or the name is not ours.
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			continue
		}
		d := v1.Hash{Algorithm: "sha256", Hex: name}
		e, mtime, err := s.loadPartial(d)
		if err != nil {
			log.Info("Removing unreadable partial blob", "digest", d.String(), "err", err)
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			continue
		}
		all = append(all, found{e, mtime})
	}

	slices.SortStableFunc(all, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, f := range all {
		s.tick++
		f.e.lastUse = s.tick
		s.entries[f.e.digest] = f.e
		s.used += f.e.size
	}
	return nil
}

// loadPartial reads a partial blob's metadata and checks its data file.
func (s *Store) loadPartial(d v1.Hash) (*entry, time.Time, error) {
	dir := filepath.Dir(s.partialPath(d, dataFile))
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), fsutil.TempPrefix) {
			_ = os.Remove(filepath.Join(dir, de.Name()))
		}
	}
	raw, err := os.ReadFile(s.partialPath(d, piecesName))
	if err != nil {
		return nil, time.Time{}, err
	}
	pf, err := decodePieces(raw)
	if err != nil {
		return nil, time.Time{}, err
	}
	fi, err := os.Stat(s.partialPath(d, dataFile))
	if err != nil {
		return nil, time.Time{}, err
	}
	if fi.Size() != pf.size {
		return nil, time.Time{}, fmt.Errorf("data file has %d bytes, pieces file says %d", fi.Size(), pf.size)
	}
	e := newPartialEntry(d, pf.size, pf.pieceSize)
	e.bits = pf.bits
	if raw, err := os.ReadFile(s.partialPath(d, hashesName)); err == nil {
		var h PieceHashes
		if err := h.UnmarshalBinary(raw); err != nil || h.PieceSize != pf.pieceSize || len(h.Sums) != pf.bits.Len() {
			s.opts.Logger.Info("Dropping unreadable piece hashes", "digest", d.String(), "err", err)
			_ = os.Remove(s.partialPath(d, hashesName))
		} else {
			e.trusted = h.Sums
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, time.Time{}, err
	}
	pfi, err := os.Stat(s.partialPath(d, piecesName))
	if err != nil {
		return nil, time.Time{}, err
	}
	return e, pfi.ModTime(), nil
}

// Begin returns a handle for writing the blob d of size bytes (from the
// manifest descriptor) in pieces of pieceSize bytes (0: Options.PieceSize).
// A partial blob left by an earlier Begin, in this run or a previous one,
// is resumed with its pieces; one with another size or piece size is
// discarded unless it is in use (ErrInUse). If d is already verified, the
// handle is for the complete blob (Verified reports true; writes and Commit
// do nothing). A new partial blob reserves size bytes of the quota,
// evicting other blobs if needed. The caller must Close the handle.
func (s *Store) Begin(d v1.Hash, size, pieceSize int64) (*Blob, error) {
	if err := checkDigest(d); err != nil {
		return nil, fmt.Errorf("beginning blob: %w", err)
	}
	if pieceSize == 0 {
		pieceSize = s.opts.PieceSize
	}
	if size < 0 || pieceSize < 0 {
		return nil, fmt.Errorf("beginning blob %s: negative size %d or piece size %d", d, size, pieceSize)
	}
	s.mu.Lock()
	b, evicted, err := s.beginLocked(d, size, pieceSize)
	s.mu.Unlock()
	s.notifyEvicted(evicted)
	if err != nil {
		return nil, fmt.Errorf("beginning blob %s: %w", d, err)
	}
	return b, nil
}

func (s *Store) beginLocked(d v1.Hash, size, pieceSize int64) (*Blob, []v1.Hash, error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	e := s.entries[d]
	if e != nil {
		e.mu.RLock()
		verified, curPS := e.verified, e.pieceSize
		e.mu.RUnlock()
		switch {
		case verified && e.size != size:
			return nil, nil, fmt.Errorf("stored blob has %d bytes, descriptor says %d", e.size, size)
		case !verified && (e.size != size || curPS != pieceSize):
			if e.refs > 0 {
				return nil, nil, fmt.Errorf("%w: open as %d bytes in %d-byte pieces, asked for %d in %d", ErrInUse, e.size, curPS, size, pieceSize)
			}
			if err := s.removeLocked(e); err != nil {
				return nil, nil, err
			}
			e = nil
		}
	}
	var evicted []v1.Hash
	if e == nil {
		evicted = s.evictLocked(size)
		if q := s.opts.QuotaBytes; q > 0 && s.used+size > q {
			return nil, evicted, fmt.Errorf("%w: %d bytes needed, %d of %d used by blobs in use", ErrQuotaExceeded, size, s.used, q)
		}
		var err error
		if e, err = s.createPartial(d, size, pieceSize); err != nil {
			return nil, evicted, err
		}
		s.entries[d] = e
		s.used += size
	}
	e.released = false
	b, err := s.openLocked(e)
	return b, evicted, err
}

// createPartial lays out a new partial blob: a sparse data file of the
// final size and an empty pieces file.
func (s *Store) createPartial(d v1.Hash, size, pieceSize int64) (*entry, error) {
	dir := filepath.Dir(s.partialPath(d, dataFile))
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.partialPath(d, dataFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	e := newPartialEntry(d, size, pieceSize)
	sync := s.opts.Sync == SyncPieces
	if err := fsutil.WriteFile(s.partialPath(d, piecesName), piecesFile{size, pieceSize, e.bits}.encode(), sync); err != nil {
		return nil, err
	}
	if sync {
		if err := fsutil.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Get returns a read handle on the blob d, complete or partial. It returns
// ErrNotFound when the store does not hold d or holds it only until its
// last reader is done (Release). The caller must Close the handle.
func (s *Store) Get(d v1.Hash) (*Blob, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	e := s.entries[d]
	if e == nil || e.released {
		s.mu.Unlock()
		return nil, fmt.Errorf("getting blob %s: %w", d, ErrNotFound)
	}
	first := e.refs == 0
	b, err := s.openLocked(e)
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("getting blob %s: %w", d, err)
	}
	if first && b.Verified() {
		// Persist the use for the LRU order of the next run, once per
		// opening rather than per read (peers read piece by piece); best
		// effort.
		now := time.Now()
		_ = os.Chtimes(s.blobPath(d), now, now)
	}
	return b, nil
}

// openLocked takes a reference on e, opening its file for the first one.
func (s *Store) openLocked(e *entry) (*Blob, error) {
	if e.refs == 0 {
		e.mu.Lock()
		var f *os.File
		var err error
		if e.verified {
			f, err = os.Open(s.blobPath(e.digest))
		} else {
			f, err = os.OpenFile(s.partialPath(e.digest, dataFile), os.O_RDWR, 0)
		}
		if err == nil {
			e.f = f
		}
		e.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	e.refs++
	s.touchLocked(e)
	return &Blob{s: s, e: e}, nil
}

// touchLocked marks e as the most recently used blob.
func (s *Store) touchLocked(e *entry) {
	s.tick++
	e.lastUse = s.tick
}

// release drops the reference of a closed handle.
func (s *Store) release(e *entry) error {
	s.mu.Lock()
	e.refs--
	var err error
	var evicted []v1.Hash
	if e.refs == 0 {
		e.mu.Lock()
		f := e.f
		e.f = nil
		e.mu.Unlock()
		if f != nil {
			err = f.Close()
		}
		if e.released && s.entries[e.digest] == e { // not removed yet
			if rerr := s.removeLocked(e); err == nil {
				err = rerr
			}
		}
		if !s.closed {
			evicted = s.evictLocked(0)
		}
	}
	s.mu.Unlock()
	s.notifyEvicted(evicted)
	if err != nil {
		return fmt.Errorf("closing blob %s: %w", e.digest, err)
	}
	return nil
}

// removeLocked drops e from the index and deletes its files. Handles still
// open on a complete blob keep reading it through their open file.
func (s *Store) removeLocked(e *entry) error {
	if s.entries[e.digest] == e {
		delete(s.entries, e.digest)
		s.used -= e.size
	}
	e.mu.Lock()
	verified := e.verified
	e.gone = true
	e.broadcastLocked()
	e.mu.Unlock()
	var err error
	if verified {
		err = os.Remove(s.blobPath(e.digest))
	} else {
		err = os.RemoveAll(filepath.Dir(s.partialPath(e.digest, dataFile)))
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing blob %s: %w", e.digest, err)
	}
	return nil
}

// evictLocked evicts blobs no handle holds until need more bytes fit in
// the quota: least recently used complete blobs first, then partial blobs.
// It returns the evicted digests.
func (s *Store) evictLocked(need int64) []v1.Hash {
	q := s.opts.QuotaBytes
	if q <= 0 {
		return nil
	}
	var evicted []v1.Hash
	for s.used+need > q {
		var victim, partial *entry
		for _, e := range s.entries {
			if e.refs > 0 {
				continue
			}
			e.mu.RLock()
			verified := e.verified
			e.mu.RUnlock()
			if verified {
				if victim == nil || e.lastUse < victim.lastUse {
					victim = e
				}
			} else if partial == nil || e.lastUse < partial.lastUse {
				partial = e
			}
		}
		if victim == nil {
			victim = partial
		}
		if victim == nil {
			break
		}
		if err := s.removeLocked(victim); err != nil {
			s.opts.Logger.Error(err, "Evicting blob")
			break
		}
		evicted = append(evicted, victim.digest)
	}
	return evicted
}

func (s *Store) notifyEvicted(ds []v1.Hash) {
	if s.opts.OnEvict == nil {
		return
	}
	for _, d := range ds {
		s.opts.OnEvict(d)
	}
}

// Delete removes the blob d now. Handles open on a complete blob keep
// reading it; a partial blob with open handles is not deleted (ErrInUse).
func (s *Store) Delete(d v1.Hash) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[d]
	if e == nil {
		return fmt.Errorf("deleting blob %s: %w", d, ErrNotFound)
	}
	e.mu.RLock()
	verified := e.verified
	e.mu.RUnlock()
	if !verified && e.refs > 0 {
		return fmt.Errorf("deleting blob %s: %w: %d open handles on a partial blob", d, ErrInUse, e.refs)
	}
	return s.removeLocked(e)
}

// Release drops the store's copy of d because the runtime now holds it (it
// committed the blob to its own content store): Get and Holdings stop
// showing it at once, and its files are deleted when the last open handle
// is closed (now, if none is). A later Begin of d takes it back. Releasing
// a blob the store does not hold is not an error.
func (s *Store) Release(d v1.Hash) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[d]
	if e == nil {
		return nil
	}
	if e.refs > 0 {
		e.released = true
		return nil
	}
	return s.removeLocked(e)
}

// Stat describes the blob d, as Holdings would.
func (s *Store) Stat(d v1.Hash) (Holding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[d]
	if e == nil || e.released {
		return Holding{}, fmt.Errorf("stat blob %s: %w", d, ErrNotFound)
	}
	return e.holding(), nil
}

// Holdings lists every complete and partial blob the store holds (not
// those released), sorted by digest, for the tracker re-announcer.
func (s *Store) Holdings() []Holding {
	s.mu.Lock()
	out := make([]Holding, 0, len(s.entries))
	for _, e := range s.entries {
		if !e.released {
			out = append(out, e.holding())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Holding) int { return strings.Compare(a.Digest.Hex, b.Digest.Hex) })
	return out
}

// Usage returns the store's disk accounting.
func (s *Store) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := Usage{Used: s.used, Quota: s.opts.QuotaBytes}
	for _, e := range s.entries {
		e.mu.RLock()
		if e.verified {
			u.Verified++
		} else {
			u.Partial++
		}
		e.mu.RUnlock()
	}
	return u
}
