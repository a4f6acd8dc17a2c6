package ratingio

import (
	"errors"

	"github.com/privrec/privrec/ratings"
)

// ReadFile reads a ratings file (gzip transparently) in the given format.
// TEMPORARY: the readers are being written; this returns an error until then.
func ReadFile(path string, opt Options) (*ratings.Matrix, error) {
	return nil, errors.New("ratingio: readers not yet implemented")
}
