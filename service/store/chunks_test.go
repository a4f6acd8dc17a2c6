package store

import (
	"context"
	"path/filepath"
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

// TestFailedBatchRollsBack: in SQLite the batch statements end the whole
// transaction on a failing row (OR ROLLBACK, no statement journal). A
// batch that fails that way returns an error, leaves nothing of itself
// behind — not even what its earlier statements wrote — and the store
// takes the next batch normally.
func TestFailedBatchRollsBack(t *testing.T) {
	ctx := context.Background()
	st, err := Create(ctx, "sqlite:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Init(ctx, []byte(`{"config":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx Tx) error {
		return tx.CreateUser(ctx, NewUser{ID: "u1", TokenHash: []byte("h1"), Budget: 10 * Nano, CreatedMS: 1})
	}); err != nil {
		t.Fatal(err)
	}
	sub := func(id string) Submission {
		return Submission{User: "u1", ClientID: id, BodyHash: []byte(id), Charge: Nano, Values: []byte("[1]"), Received: 1}
	}
	err = st.Update(ctx, func(tx Tx) error {
		if _, err := tx.SubmitBatch(ctx, []Submission{sub("a"), sub("b")}); err != nil {
			return err
		}
		// A row the unique (user, client ID) index refuses, as no batch
		// of the service's can produce: the statement fails.
		s := st.(*sqlStore)
		_, err := tx.(*sqlTx).tx.StmtContext(ctx, s.batch[1].insert).QueryContext(ctx, "u1", "a", []byte("x"), Nano, Nano, int64(1), "[1]", 1)
		if err == nil {
			t.Error("a repeated (user, client ID) was inserted")
		}
		return err
	})
	if err == nil {
		t.Fatal("the failed transaction reported success")
	}
	stats, err := st.Stats(ctx)
	if err != nil || stats.Reports != 0 || stats.MaxSpent != 0 {
		t.Fatalf("after the failed batch: %+v, %v (want nothing stored or charged)", stats, err)
	}
	var res []Result
	if err := st.Update(ctx, func(tx Tx) error {
		var err error
		res, err = tx.SubmitBatch(ctx, []Submission{sub("a"), sub("c")})
		return err
	}); err != nil || res[0].Outcome != Stored || res[1].Outcome != Stored {
		t.Fatalf("the next batch: %+v, %v", res, err)
	}
	if err := st.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
