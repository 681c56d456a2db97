package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// Bitmap is a fixed-length set of piece indices: bit i is set when piece i
// is present. The zero value is an empty bitmap of length 0. A Bitmap is a
// plain value: copy it with Clone before sharing it between goroutines that
// modify it.
type Bitmap struct {
	n     int
	words []uint64
}

// NewBitmap returns an empty bitmap for n pieces. It panics if n < 0.
func NewBitmap(n int) Bitmap {
	if n < 0 {
		panic("store: negative bitmap length")
	}
	return Bitmap{n: n, words: make([]uint64, (n+63)/64)}
}

// Len returns the number of pieces the bitmap describes.
func (b Bitmap) Len() int { return b.n }

// check panics when i is out of range, like an index into a slice.
func (b Bitmap) check(i int) {
	if i < 0 || i >= b.n {
		panic(fmt.Sprintf("store: bitmap index %d out of range [0,%d)", i, b.n))
	}
}

// Has reports whether bit i is set. It panics if i is out of range.
func (b Bitmap) Has(i int) bool {
	b.check(i)
	return b.words[i/64]&(1<<(uint(i)%64)) != 0
}

// Set sets bit i. It panics if i is out of range.
func (b *Bitmap) Set(i int) {
	b.check(i)
	b.words[i/64] |= 1 << (uint(i) % 64)
}

// Clear clears bit i. It panics if i is out of range.
func (b *Bitmap) Clear(i int) {
	b.check(i)
	b.words[i/64] &^= 1 << (uint(i) % 64)
}

// Count returns the number of set bits.
func (b Bitmap) Count() int {
	c := 0
	for _, w := range b.words {
		c += bits.OnesCount64(w)
	}
	return c
}

// Full reports whether every bit is set (true for a bitmap of length 0).
func (b Bitmap) Full() bool { return b.FirstMissing() < 0 }

// FirstMissing returns the lowest clear bit, or -1 when the bitmap is full.
func (b Bitmap) FirstMissing() int { return b.NextMissing(0) }

// NextMissing returns the lowest clear bit at or after from, or -1.
func (b Bitmap) NextMissing(from int) int {
	if from < 0 {
		from = 0
	}
	for wi := from / 64; wi < len(b.words); wi++ {
		w := ^b.words[wi]
		if wi == from/64 {
			w &^= (1 << (uint(from) % 64)) - 1
		}
		if w != 0 {
			i := wi*64 + bits.TrailingZeros64(w)
			if i >= b.n {
				return -1
			}
			return i
		}
	}
	return -1
}

// NextSet returns the lowest set bit at or after from, or -1.
func (b Bitmap) NextSet(from int) int {
	if from < 0 {
		from = 0
	}
	for wi := from / 64; wi < len(b.words); wi++ {
		w := b.words[wi]
		if wi == from/64 {
			w &^= (1 << (uint(from) % 64)) - 1
		}
		if w != 0 {
			return wi*64 + bits.TrailingZeros64(w) // bits >= n are never set
		}
	}
	return -1
}

// All yields the set bits in increasing order.
func (b Bitmap) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := b.NextSet(0); i >= 0; i = b.NextSet(i + 1) {
			if !yield(i) {
				return
			}
		}
	}
}

// Missing yields the clear bits in increasing order.
func (b Bitmap) Missing() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := b.NextMissing(0); i >= 0; i = b.NextMissing(i + 1) {
			if !yield(i) {
				return
			}
		}
	}
}

// Clone returns an independent copy of b.
func (b Bitmap) Clone() Bitmap {
	return Bitmap{n: b.n, words: append([]uint64(nil), b.words...)}
}

// Equal reports whether b and o have the same length and bits.
func (b Bitmap) Equal(o Bitmap) bool {
	if b.n != o.n {
		return false
	}
	for i := range b.words {
		if b.words[i] != o.words[i] {
			return false
		}
	}
	return true
}

// String lists the set bits as ranges, e.g. "3/10{0-1,5}".
func (b Bitmap) String() string {
	var sb strings.Builder
	sb.WriteString(strconv.Itoa(b.Count()))
	sb.WriteByte('/')
	sb.WriteString(strconv.Itoa(b.n))
	sb.WriteByte('{')
	first := true
	for i := b.NextSet(0); i >= 0; {
		j := b.NextMissing(i)
		if j < 0 {
			j = b.n
		}
		if !first {
			sb.WriteByte(',')
		}
		first = false
		sb.WriteString(strconv.Itoa(i))
		if j-1 > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(j - 1))
		}
		i = b.NextSet(j)
	}
	sb.WriteByte('}')
	return sb.String()
}

// errBitmapEncoding is wrapped by every UnmarshalBinary error.
var errBitmapEncoding = errors.New("invalid bitmap encoding")

// MarshalBinary encodes b as the uvarint length followed by ceil(n/8)
// bytes, piece i in byte i/8 under mask 0x80>>(i%8) (BitTorrent's bitfield
// order); the padding bits of the last byte are zero.
func (b Bitmap) MarshalBinary() ([]byte, error) {
	return b.appendBinary(nil), nil
}

// appendBinary appends the MarshalBinary encoding of b to dst.
func (b Bitmap) appendBinary(dst []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(b.n)), b.Bytes()...)
}

// Bytes returns the bitmap as (Len()+7)/8 bytes, piece i in bit 7-(i%8)
// of byte i/8 (the first piece is the high bit of the first byte): the
// trackers' wire form.
func (b Bitmap) Bytes() []byte {
	out := make([]byte, (b.n+7)/8)
	for i := range b.All() {
		out[i/8] |= 0x80 >> (uint(i) % 8)
	}
	return out
}

// maxBitmapLen bounds the length UnmarshalBinary accepts (a 1 TiB blob in
// 4 KiB pieces), so that a corrupt header cannot make it allocate wildly.
const maxBitmapLen = 1 << 28

// UnmarshalBinary decodes the MarshalBinary encoding into b, rejecting a
// wrong length, trailing bytes or set padding bits.
func (b *Bitmap) UnmarshalBinary(data []byte) error {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > maxBitmapLen {
		return fmt.Errorf("%w: bad length header", errBitmapEncoding)
	}
	body := data[k:]
	if uint64(len(body)) != (n+7)/8 {
		return fmt.Errorf("%w: %d pieces need %d bytes, have %d", errBitmapEncoding, n, (n+7)/8, len(body))
	}
	r := NewBitmap(int(n))
	for byteIdx, v := range body {
		for bit := 0; bit < 8 && v != 0; bit++ {
			if v&(0x80>>uint(bit)) == 0 {
				continue
			}
			i := byteIdx*8 + bit
			if i >= r.n {
				return fmt.Errorf("%w: padding bit %d set", errBitmapEncoding, i)
			}
			r.Set(i)
		}
	}
	*b = r
	return nil
}
