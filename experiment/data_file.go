package experiment

import (
	"context"
	"errors"
)

// fileSource reads ratings files; it needs the transform package.
func fileSource(ctx context.Context, d DataSpec, seed uint64, dataDir string) (*Split, error) {
	return nil, errors.New("file datasets: not implemented yet")
}
