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
	m := &Model{
		Method:    method,
		Output:    Ratings,
		Users:     append([]string(nil), data.Users.Names()...),
		Items:     append([]string(nil), data.Items.Names()...),
		SeenPtr:   make([]int64, data.NumUsers()+1),
		SeenItems: make([]int32, 0, data.Len()),
	}
	for u := range int32(data.NumUsers()) {
		items, _ := data.UserRow(u)
		m.SeenItems = append(m.SeenItems, items...)
		m.SeenPtr[u+1] = int64(len(m.SeenItems))
	}
	return m
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
