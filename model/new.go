package model

import (
	"github.com/privrec/privrec/ratings"
)

// New returns a model shell for a method trained on data: the user and item
// IDs, the training fingerprint, the items each user rated (so recommend
// excludes them), and the data's mean and range (the default relevance
// threshold and the clamp for predictions). The caller fills in the
// factors (or Dense), biases, Transform details, Params and Guarantee.
func New(method string, data *ratings.Matrix) *Model {
	lo, hi := data.Range()
	if data.Len() == 0 {
		lo, hi = 0, 0
	}
	m := &Model{
		Method:      method,
		Fingerprint: data.Fingerprint(),
		Output:      Ratings,
		Users:       append([]string(nil), data.Users.Names()...),
		Items:       append([]string(nil), data.Items.Names()...),
		Transform:   Transform{DataMin: lo, DataMax: hi, DataMean: data.Mean()},
		SeenPtr:     make([]int64, data.NumUsers()+1),
		SeenItems:   make([]int32, 0, data.Len()),
	}
	for u := range int32(data.NumUsers()) {
		items, _ := data.UserRow(u)
		m.SeenItems = append(m.SeenItems, items...)
		m.SeenPtr[u+1] = int64(len(m.SeenItems))
	}
	return m
}
