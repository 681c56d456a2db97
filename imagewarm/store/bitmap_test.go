package store

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBitmapMatchesModel drives bitmaps of awkward lengths through random
// operations and compares every query with a []bool model.
func TestBitmapMatchesModel(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 127, 128, 200} {
		t.Run("n="+strconv.Itoa(n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			b := NewBitmap(n)
			model := make([]bool, n)
			for step := range 4 * (n + 1) {
				if n > 0 {
					i := rng.IntN(n)
					if rng.IntN(3) == 0 {
						b.Clear(i)
						model[i] = false
					} else {
						b.Set(i)
						model[i] = true
					}
				}
				if step%(n/2+1) == 0 {
					checkBitmap(t, b, model)
				}
			}
			checkBitmap(t, b, model)
		})
	}
}

func checkBitmap(t *testing.T, b Bitmap, model []bool) {
	t.Helper()
	n := len(model)
	require.Equal(t, n, b.Len())
	var set, missing []int
	for i, v := range model {
		require.Equal(t, v, b.Has(i), "Has(%d)", i)
		if v {
			set = append(set, i)
		} else {
			missing = append(missing, i)
		}
	}
	require.Equal(t, len(set), b.Count())
	require.Equal(t, len(missing) == 0, b.Full())
	require.Equal(t, set, nilIfEmpty(slices.Collect(b.All())))
	require.Equal(t, missing, nilIfEmpty(slices.Collect(b.Missing())))
	first := -1
	if len(missing) > 0 {
		first = missing[0]
	}
	require.Equal(t, first, b.FirstMissing())
	for from := -1; from <= n; from++ {
		wantSet, wantMissing := -1, -1
		for i := max(from, 0); i < n; i++ {
			if model[i] && wantSet < 0 {
				wantSet = i
			}
			if !model[i] && wantMissing < 0 {
				wantMissing = i
			}
		}
		require.Equal(t, wantSet, b.NextSet(from), "NextSet(%d)", from)
		require.Equal(t, wantMissing, b.NextMissing(from), "NextMissing(%d)", from)
	}
	raw, err := b.MarshalBinary()
	require.NoError(t, err)
	var back Bitmap
	require.NoError(t, back.UnmarshalBinary(raw))
	require.True(t, b.Equal(back), "round trip of %s gave %s", b, back)
	c := b.Clone()
	require.True(t, b.Equal(c))
	if n > 0 {
		c.Set(0)
		c.Clear(n - 1)
		require.Equal(t, model[0], b.Has(0), "Clone shares storage")
		require.Equal(t, model[n-1], b.Has(n-1), "Clone shares storage")
	}
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestBitmapEncoding(t *testing.T) {
	b := NewBitmap(10)
	for _, i := range []int{0, 1, 5, 9} {
		b.Set(i)
	}
	raw, err := b.MarshalBinary()
	require.NoError(t, err)
	// uvarint 10, then bits 0,1,5 in byte 0 (MSB first) and bit 9 in byte 1.
	require.Equal(t, []byte{10, 0b1100_0100, 0b0100_0000}, raw)
	require.Equal(t, "4/10{0-1,5,9}", b.String())
	require.Equal(t, "0/0{}", NewBitmap(0).String())

	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"empty", nil},
		{"short body", []byte{10, 0xff}},
		{"trailing byte", []byte{10, 0, 0, 0}},
		{"padding bit set", []byte{10, 0, 0b0010_0000}},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Bitmap
			require.ErrorIs(t, got.UnmarshalBinary(tc.raw), errBitmapEncoding)
		})
	}
}

func TestBitmapOutOfRange(t *testing.T) {
	a := NewBitmap(70)
	require.Panics(t, func() { a.Has(70) })
	require.Panics(t, func() { a.Set(-1) })
}
