package model

import (
	"github.com/privrec/privrec/ratings"
)

// New returns a model shell for a method trained on data whose users are
// public under the method's neighbouring relation (entry-level DP, where
// who rated what is public, or a non-private model): the user and item IDs
// and the items each user rated (so recommend excludes them). Nothing
// value-dependent is taken from the data. The caller fills in the factors
// (or Dense), biases, Transform, Params and Guarantee.
func New(method string, data *ratings.Matrix) *Model {
	// The seen items are the data's user-major index arrays, shared (read
	// only, capacity clipped so that an append copies): at Netflix size a
	// copy would be 400 MB more while the model is written.
	rowPtr, rowCol, _, _ := data.CSR()
	if rowCol == nil {
		rowCol = []int32{}
	}
	return &Model{
		Method:    method,
		Output:    Ratings,
		Users:     append([]string(nil), data.Users.Names()...),
		Items:     append([]string(nil), data.Items.Names()...),
		SeenPtr:   rowPtr[:len(rowPtr):len(rowPtr)],
		SeenItems: rowCol[:len(rowCol):len(rowCol)],
	}
}

// NewPublic returns the shell of a model that holds no users: the item side
// only, over the declared catalogue. Each user's own state goes into a
// UserStates, apart from the model.
func NewPublic(method string, c *Catalogue) *Model {
	m := &Model{Method: method, Output: Ratings, Items: c.IDs()}
	if c.HasTitles() {
		m.Titles = c.Titles()
	}
	return m
}
