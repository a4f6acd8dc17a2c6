package store

import (
	"slices"
	"testing"
)

// TestChunks: exact chunks sum to n in prepared sizes; padded chunks
// cover n in prepared sizes with less than one chunk of padding, one
// statement for any batch up to the largest size.
func TestChunks(t *testing.T) {
	for _, c := range []struct {
		n             int
		exact, padded []int
	}{
		{0, nil, nil},
		{1, []int{1}, []int{1}},
		{3, []int{2, 1}, []int{4}},
		{28, []int{16, 8, 4}, []int{32}},
		{256, []int{256}, []int{256}},
		{300, []int{256, 32, 8, 4}, []int{256, 64}},
		{513, []int{256, 256, 1}, []int{256, 256, 1}},
	} {
		if got := chunks(c.n); !slices.Equal(got, c.exact) {
			t.Errorf("chunks(%d) = %v, want %v", c.n, got, c.exact)
		}
		if got := paddedChunks(c.n); !slices.Equal(got, c.padded) {
			t.Errorf("paddedChunks(%d) = %v, want %v", c.n, got, c.padded)
		}
	}
}
