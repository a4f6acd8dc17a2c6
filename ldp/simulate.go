package ldp

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/ratings"
)

var errReaderStopped = errors.New("ldp: the reader of the reports stopped")

// Simulate runs the clients of a simulation: every user of m (the users in
// the data are the clients, each sending one report; m's user IDs may
// include clients without ratings, see WithClients) randomizes her vector
// over the declared catalogue with mechanism mech at per-rating ε on the
// declared scale, as CollectOver does, and Simulate returns what the service
// receives — the reports, read back exactly as from a collect file
// (values rounded as written), and the header. Nothing of the scale or the
// population is read from the ratings: a rating outside the scale is an
// error, ratings of items outside the catalogue are not reported.
func Simulate(ctx context.Context, m *ratings.Matrix, mech Mechanism, eps float64, scale Scale, catalogue []string, src *noise.Source, workers int) (*ratings.Matrix, Header, error) {
	c, err := SimulateTo(ctx, nil, m, mech, eps, 0, scale, catalogue, src, workers)
	if err != nil {
		return nil, c.Header, err
	}
	return c.Reports, c.Header, nil
}

// SimulateTo is Simulate that also writes the collect file to w (nil:
// nowhere), for a trainer that reads the header from a file, and with
// meanEps > 0 has every client send her mean report at that ε too
// (MeanReporter). It returns the whole collection as read back.
func SimulateTo(ctx context.Context, w io.Writer, m *ratings.Matrix, mech Mechanism, eps, meanEps float64, scale Scale, catalogue []string, src *noise.Source, workers int) (*Collection, error) {
	r, err := New(mech, eps, scale)
	if err != nil {
		return &Collection{}, err
	}
	var mean *MeanReporter
	if meanEps > 0 {
		if mean, err = NewMeanReporter(meanEps, scale); err != nil {
			return &Collection{}, err
		}
	}
	pr, pw := io.Pipe()
	var out io.Writer = pw
	if w != nil {
		out = io.MultiWriter(pw, w)
	}
	done := make(chan error, 1)
	go func() {
		_, err := CollectOver(ctx, out, m, r, mean, catalogue, src, workers)
		pw.CloseWithError(err) // nil: EOF for the reader
		done <- err
	}()
	c, rerr := ReadCollection(pr)
	// Unblock the writer if the reader stopped early, then wait for it.
	pr.CloseWithError(errReaderStopped)
	cerr := <-done
	if cerr != nil && !errors.Is(cerr, errReaderStopped) {
		return c, fmt.Errorf("ldp: simulating the clients: %w", cerr)
	}
	if rerr != nil {
		return c, fmt.Errorf("ldp: reading the simulated reports: %w", rerr)
	}
	return c, nil
}

// WithClients returns m with exactly the declared clients as its users,
// in their order: a client without any rating has an empty row (her device
// still sends a report over the whole catalogue, with every cell
// randomized from "missing"). A user of m who is not a client is an error:
// no device would report her ratings.
func WithClients(m *ratings.Matrix, clients []string) (*ratings.Matrix, error) {
	users, err := ratings.IDsFrom(clients)
	if err != nil {
		return nil, fmt.Errorf("ldp: clients: %w", err)
	}
	row := make([]int32, users.Len()) // client → m's user, −1 when none
	for k := range row {
		row[k] = -1
	}
	for u, n := range m.Users.Names() {
		k, ok := users.Lookup(n)
		if !ok {
			return nil, fmt.Errorf("ldp: user %q has ratings but is not among the declared clients", n)
		}
		row[k] = int32(u)
	}
	rowPtr := make([]int64, users.Len()+1)
	rowCol := make([]int32, 0, m.Len())
	rowVal := make([]float32, 0, m.Len())
	var rowT []int64
	if m.HasTime() {
		rowT = make([]int64, 0, m.Len())
	}
	for k, u := range row {
		if u >= 0 {
			its, vals := m.UserRow(u)
			rowCol = append(rowCol, its...)
			rowVal = append(rowVal, vals...)
			if rowT != nil {
				rowT = append(rowT, m.UserTimes(u)...)
			}
		}
		rowPtr[k+1] = int64(len(rowCol))
	}
	out, err := ratings.FromCSR(users, m.Items, m.NumItems(), rowPtr, rowCol, rowVal, rowT)
	if err != nil {
		return nil, fmt.Errorf("ldp: clients: %w", err)
	}
	return out, nil
}
