// Package ratingstest makes small deterministic rating matrices for the
// tests of several packages (the aggregators' fleet, the device's model
// build), so each does not carry its own copy of the same generator.
package ratingstest

import (
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// Pattern is users × items ratings (1–5) on a fixed pattern: user u rates
// item j when (7u + 3j) mod 5 < 3, with 1 + (u + 2j) mod 5. Users are
// named u0, u1, …; items by idFormat (e.g. "i%d") applied to 0, 1, …; the
// catalogue lists the items in that order.
func Pattern(users, items int, idFormat string) (*ratings.Matrix, *model.Catalogue, error) {
	b := ratings.NewBuilder(ratings.DupError)
	ids := make([]string, items)
	for j := range ids {
		ids[j] = fmt.Sprintf(idFormat, j)
	}
	for u := range users {
		for j := range ids {
			if (u*7+j*3)%5 < 3 {
				if err := b.Add(fmt.Sprintf("u%d", u), ids[j], float64(1+(u+2*j)%5), 0); err != nil {
					return nil, nil, fmt.Errorf("rating of user %d, item %s: %w", u, ids[j], err)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		return nil, nil, fmt.Errorf("building the matrix: %w", err)
	}
	cat, err := model.NewCatalogue(ids, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("the catalogue: %w", err)
	}
	return m, cat, nil
}
