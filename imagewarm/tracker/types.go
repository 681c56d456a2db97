package tracker

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"time"
)

// Limits on what a tracker accepts. They bound a tracker's memory and a
// request's size whatever a peer sends.
const (
	// MaxPieces is the most pieces a blob may have (256 GiB in 4 MiB
	// pieces); a bitmap is at most MaxPieces/8 bytes.
	MaxPieces = 1 << 16
	// MaxBatch is the most announcements (or withdrawn digests) in one
	// request.
	MaxBatch = 256
	// MaxRequestBytes bounds a request body: a full batch of the largest
	// bitmaps, or the piece hashes of the largest blob, in JSON.
	MaxRequestBytes = 4 << 20
	// MaxResponseBytes bounds a response body a Client reads.
	MaxResponseBytes = 8 << 20
	// maxDigestLen, maxNameLen, maxEndpointLen and maxZoneLen bound the
	// strings of a request.
	maxDigestLen   = 256
	maxNameLen     = 253
	maxEndpointLen = 300
	maxZoneLen     = 128
)

// Errors a Tracker returns (wrapped); the HTTP layer maps them to status
// codes and the Client back.
var (
	// ErrInvalid is a malformed request.
	ErrInvalid = errors.New("invalid tracker request")
	// ErrFull is a tracker at one of its capacity limits.
	ErrFull = errors.New("tracker is full")
	// ErrConflict is piece hashes that differ from those already published.
	ErrConflict = errors.New("piece hashes conflict with the published ones")
)

// Bitmap records which pieces of a blob a node has: piece i is bit
// 7-(i%8) of byte i/8 (the first piece is the high bit of the first byte,
// as in BitTorrent). Its length is (pieces+7)/8 bytes.
type Bitmap []byte

// NewBitmap returns an empty bitmap for n pieces.
func NewBitmap(n int) Bitmap { return make(Bitmap, (n+7)/8) }

// Has reports whether piece i is set (false beyond the bitmap).
func (b Bitmap) Has(i int) bool {
	return i >= 0 && i/8 < len(b) && b[i/8]&(0x80>>(i%8)) != 0
}

// Set marks piece i (ignored beyond the bitmap).
func (b Bitmap) Set(i int) {
	if i >= 0 && i/8 < len(b) {
		b[i/8] |= 0x80 >> (i % 8)
	}
}

// Clear unmarks piece i (ignored beyond the bitmap).
func (b Bitmap) Clear(i int) {
	if i >= 0 && i/8 < len(b) {
		b[i/8] &^= 0x80 >> (i % 8)
	}
}

// Count returns how many pieces are set.
func (b Bitmap) Count() int {
	n := 0
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return n
}

// PieceCount returns how many pieces of pieceSize a blob of size bytes has
// (0 when either is not positive).
func PieceCount(size, pieceSize int64) int64 {
	if size <= 0 || pieceSize <= 0 {
		return 0
	}
	return (size + pieceSize - 1) / pieceSize
}

// Announcement says that a node holds a blob, whole or in part.
type Announcement struct {
	// Digest is the blob's OCI digest (algorithm:hex).
	Digest string `json:"digest"`
	// Node is the holder's node name.
	Node string `json:"node"`
	// Endpoint is host:port where the holder serves the blob.
	Endpoint string `json:"endpoint"`
	// Zone is the holder's topology zone, if known.
	Zone string `json:"zone,omitempty"`
	// Complete says the holder has the whole blob and verified its digest.
	Complete bool `json:"complete,omitempty"`
	// Size is the blob's size in bytes; required for a partial holding.
	Size int64 `json:"size,omitempty"`
	// PieceSize is the size of every piece but the last; required for a
	// partial holding.
	PieceSize int64 `json:"pieceSize,omitempty"`
	// Pieces are the pieces a partial holder has; empty when Complete.
	Pieces Bitmap `json:"pieces,omitempty"`
	// Leased says a partial holder is fetching the blob from upstream
	// under a lease. A tracker that does not know of the lease (it took
	// over from one that died, or restarted) records it, so it does not
	// hand a second one out.
	Leased bool `json:"leased,omitempty"`
	// ReadAt is when the holder read the state it announces (its own
	// clock, Unix nanoseconds). A tracker ignores an announcement older
	// than the one it has from the same node, so a re-announcement
	// snapshotted before a blob completed cannot overtake the announcement
	// that it is complete. Zero is never ignored.
	ReadAt int64 `json:"readAt,omitempty"`
}

// Validate checks the announcement against the tracker's limits.
func (a Announcement) Validate() error {
	if err := validDigest(a.Digest); err != nil {
		return err
	}
	if err := validNode(a.Node); err != nil {
		return err
	}
	if a.Endpoint == "" || len(a.Endpoint) > maxEndpointLen {
		return fmt.Errorf("%w: endpoint must be 1 to %d bytes", ErrInvalid, maxEndpointLen)
	}
	if _, _, err := net.SplitHostPort(a.Endpoint); err != nil {
		return fmt.Errorf("%w: endpoint %q is not host:port", ErrInvalid, a.Endpoint)
	}
	if len(a.Zone) > maxZoneLen {
		return fmt.Errorf("%w: zone longer than %d bytes", ErrInvalid, maxZoneLen)
	}
	if a.Size < 0 || a.PieceSize < 0 {
		return fmt.Errorf("%w: negative size or piece size", ErrInvalid)
	}
	if a.Complete {
		if len(a.Pieces) != 0 {
			return fmt.Errorf("%w: a complete holding carries no piece bitmap", ErrInvalid)
		}
		return nil
	}
	n, err := pieces(a.Size, a.PieceSize)
	if err != nil {
		return err
	}
	if want := (n + 7) / 8; int64(len(a.Pieces)) != want {
		return fmt.Errorf("%w: piece bitmap is %d bytes, want %d for %d pieces", ErrInvalid, len(a.Pieces), want, n)
	}
	if n%8 != 0 && a.Pieces[len(a.Pieces)-1]&(0xff>>(n%8)) != 0 {
		return fmt.Errorf("%w: piece bitmap has bits set beyond its %d pieces", ErrInvalid, n)
	}
	return nil
}

// pieces validates a blob's size and piece size and returns its piece count.
func pieces(size, pieceSize int64) (int64, error) {
	if size <= 0 || pieceSize <= 0 {
		return 0, fmt.Errorf("%w: size and piece size must be positive", ErrInvalid)
	}
	n := PieceCount(size, pieceSize)
	if n > MaxPieces {
		return 0, fmt.Errorf("%w: %d pieces, at most %d allowed (use larger pieces)", ErrInvalid, n, MaxPieces)
	}
	return n, nil
}

// Holder is one node's holding of a blob as a tracker knows it.
type Holder struct {
	// Node is the holder's node name.
	Node string `json:"node"`
	// Endpoint is host:port where the holder serves the blob.
	Endpoint string `json:"endpoint"`
	// Zone is the holder's topology zone, if known.
	Zone string `json:"zone,omitempty"`
	// Complete says the holder has the whole, verified blob.
	Complete bool `json:"complete,omitempty"`
	// Size is the blob's size in bytes, if announced.
	Size int64 `json:"size,omitempty"`
	// PieceSize is the holder's piece size (partial holders).
	PieceSize int64 `json:"pieceSize,omitempty"`
	// Pieces are the pieces a partial holder has.
	Pieces Bitmap `json:"pieces,omitempty"`
	// LastAnnounce is when the tracker last heard from the holder (tracker
	// clock).
	LastAnnounce time.Time `json:"lastAnnounce"`
}

// LeaseHolder is one node allowed to fetch a blob from upstream.
type LeaseHolder struct {
	// Node is the lease holder's node name.
	Node string `json:"node"`
	// Since is when the lease was granted (tracker clock).
	Since time.Time `json:"since"`
	// LastProgress is when the holder last announced more pieces (Since
	// until it does).
	LastProgress time.Time `json:"lastProgress"`
	// Pieces is how many pieces the holder had at its last progress.
	Pieces int `json:"pieces"`
	// Stalled says the holder made no progress within the stall timeout:
	// the next node that asks gets the lease.
	Stalled bool `json:"stalled,omitempty"`
}

// LeaseState is a digest's upstream leases.
type LeaseState struct {
	// Max is how many leases the tracker grants per digest (U).
	Max int `json:"max"`
	// Holders are the current lease holders, oldest first.
	Holders []LeaseHolder `json:"holders,omitempty"`
}

// Held reports whether node holds one of the leases.
func (s LeaseState) Held(node string) bool {
	for _, h := range s.Holders {
		if h.Node == node {
			return true
		}
	}
	return false
}

// LeaseGrant answers a lease request.
type LeaseGrant struct {
	// Granted says the requester holds a lease now (newly or already).
	Granted bool `json:"granted"`
	// Lease is the digest's lease state after the request: who to wait for
	// when the lease was not granted.
	Lease LeaseState `json:"lease"`
	// CompleteHolder, when the lease was refused, names a holder of the
	// complete blob the requester may fetch from instead: the requester's
	// view was stale (it typically finished as the requester asked).
	CompleteHolder string `json:"completeHolder,omitempty"`
}

// LeaseRequest asks for, or gives back, an upstream lease.
type LeaseRequest struct {
	// Digest is the blob.
	Digest string `json:"digest"`
	// Node is the requesting node.
	Node string `json:"node"`
	// Avoid names holders the requester will not fetch from (it
	// blacklisted them). A holder that completed the blob moments ago
	// (FreshComplete) and is not avoided makes the tracker refuse the
	// lease.
	Avoid []string `json:"avoid,omitempty"`
	// NoPeers says the requester can take data from no holder at all (it
	// cannot check their pieces yet), so complete holders do not stand in
	// the lease's way.
	NoPeers bool `json:"noPeers,omitempty"`
}

// maxAvoid caps LeaseRequest.Avoid.
const maxAvoid = 1024

// Validate checks the request.
func (r LeaseRequest) Validate() error {
	if err := validDigest(r.Digest); err != nil {
		return err
	}
	if len(r.Avoid) > maxAvoid {
		return fmt.Errorf("%w: avoid names %d nodes, at most %d", ErrInvalid, len(r.Avoid), maxAvoid)
	}
	for _, n := range r.Avoid {
		if err := validNode(n); err != nil {
			return fmt.Errorf("avoid: %w", err)
		}
	}
	return validNode(r.Node)
}

// PieceHashes are the SHA-256 sums of a blob's pieces, published by a node
// that verified the whole blob, so that later nodes can check each piece
// as it arrives instead of only the whole blob at the end.
type PieceHashes struct {
	// Size is the blob's size in bytes.
	Size int64 `json:"size"`
	// PieceSize is the size of every piece but the last.
	PieceSize int64 `json:"pieceSize"`
	// Sums are the pieces' SHA-256 sums, 32 bytes each, in piece order.
	Sums []byte `json:"sums"`
	// Publisher is the node that published them.
	Publisher string `json:"publisher,omitempty"`
}

// Sum returns piece i's SHA-256 sum (false when out of range).
func (p PieceHashes) Sum(i int) ([32]byte, bool) {
	var s [32]byte
	if i < 0 || (i+1)*32 > len(p.Sums) {
		return s, false
	}
	copy(s[:], p.Sums[i*32:])
	return s, true
}

// equal reports whether p and q describe the same pieces.
func (p PieceHashes) equal(q PieceHashes) bool {
	return p.Size == q.Size && p.PieceSize == q.PieceSize && string(p.Sums) == string(q.Sums)
}

// PublishRequest publishes a blob's piece hashes.
type PublishRequest struct {
	// Digest is the blob.
	Digest string `json:"digest"`
	// Hashes are its piece hashes; Publisher must be set.
	Hashes PieceHashes `json:"hashes"`
}

// Validate checks the request.
func (r PublishRequest) Validate() error {
	if err := validDigest(r.Digest); err != nil {
		return err
	}
	if err := validNode(r.Hashes.Publisher); err != nil {
		return fmt.Errorf("publisher: %w", err)
	}
	n, err := pieces(r.Hashes.Size, r.Hashes.PieceSize)
	if err != nil {
		return err
	}
	if int64(len(r.Hashes.Sums)) != 32*n {
		return fmt.Errorf("%w: %d bytes of sums, want 32 for each of %d pieces", ErrInvalid, len(r.Hashes.Sums), n)
	}
	return nil
}

// LookupRequest asks a tracker who holds a blob.
type LookupRequest struct {
	// Digest is the blob.
	Digest string `json:"digest"`
	// Node is the asking node; it is left out of the handout.
	Node string `json:"node,omitempty"`
	// Zone is the asking node's zone; holders in it come first.
	Zone string `json:"zone,omitempty"`
	// Limit caps the holders returned (0: the tracker's cap).
	Limit int `json:"limit,omitempty"`
	// PieceHashes asks for the blob's piece hashes too.
	PieceHashes bool `json:"pieceHashes,omitempty"`
}

// Validate checks the request.
func (r LookupRequest) Validate() error {
	if err := validDigest(r.Digest); err != nil {
		return err
	}
	if len(r.Node) > maxNameLen || len(r.Zone) > maxZoneLen {
		return fmt.Errorf("%w: node or zone too long", ErrInvalid)
	}
	if r.Limit < 0 {
		return fmt.Errorf("%w: negative limit", ErrInvalid)
	}
	return nil
}

// LookupResult answers a lookup.
type LookupResult struct {
	// Holders are live holders: complete ones first, then partial ones,
	// each group with the asker's zone first and shuffled within, capped.
	Holders []Holder `json:"holders,omitempty"`
	// Complete and Partial count all live holders the tracker knows,
	// before the cap (the asker excluded).
	Complete int `json:"complete"`
	// Partial counts the live partial holders.
	Partial int `json:"partial"`
	// Lease is the digest's upstream lease state.
	Lease LeaseState `json:"lease"`
	// PieceHashes are the blob's piece hashes, when asked for and known.
	PieceHashes *PieceHashes `json:"pieceHashes,omitempty"`
}

// AnnounceRequest carries a batch of announcements (one node's, usually).
type AnnounceRequest struct {
	// Announcements are the holdings; at most MaxBatch.
	Announcements []Announcement `json:"announcements"`
}

// Validate checks every announcement.
func (r AnnounceRequest) Validate() error {
	if len(r.Announcements) > MaxBatch {
		return fmt.Errorf("%w: %d announcements, at most %d per request", ErrInvalid, len(r.Announcements), MaxBatch)
	}
	for i, a := range r.Announcements {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("announcement %d: %w", i, err)
		}
	}
	return nil
}

// AnnounceResponse answers an AnnounceRequest.
type AnnounceResponse struct {
	// Accepted counts the announcements recorded.
	Accepted int `json:"accepted"`
	// Rejected counts those refused because the tracker is full.
	Rejected int `json:"rejected,omitempty"`
}

// WithdrawRequest says a node no longer holds some blobs.
type WithdrawRequest struct {
	// Node is the node.
	Node string `json:"node"`
	// Digests are the blobs; at most MaxBatch.
	Digests []string `json:"digests"`
}

// Validate checks the request.
func (r WithdrawRequest) Validate() error {
	if err := validNode(r.Node); err != nil {
		return err
	}
	if len(r.Digests) > MaxBatch {
		return fmt.Errorf("%w: %d digests, at most %d per request", ErrInvalid, len(r.Digests), MaxBatch)
	}
	for _, d := range r.Digests {
		if err := validDigest(d); err != nil {
			return err
		}
	}
	return nil
}

// validDigest checks the shape of an OCI digest: algorithm:encoded, the
// algorithm in lower-case letters, digits and + . _ -, the encoded part in
// letters, digits, = _ and -.
func validDigest(d string) error {
	if d == "" || len(d) > maxDigestLen {
		return fmt.Errorf("%w: digest must be 1 to %d bytes", ErrInvalid, maxDigestLen)
	}
	colon := -1
	for i := 0; i < len(d); i++ {
		c := d[i]
		switch {
		case c == ':' && colon < 0:
			colon = i
		case colon < 0 && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '.' || c == '_' || c == '-'):
		case colon >= 0 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '=' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("%w: digest %q is not algorithm:encoded", ErrInvalid, d)
		}
	}
	if colon <= 0 || colon == len(d)-1 {
		return fmt.Errorf("%w: digest %q is not algorithm:encoded", ErrInvalid, d)
	}
	return nil
}

// validNode checks a node name's length.
func validNode(n string) error {
	if n == "" || len(n) > maxNameLen {
		return fmt.Errorf("%w: node name must be 1 to %d bytes", ErrInvalid, maxNameLen)
	}
	return nil
}
