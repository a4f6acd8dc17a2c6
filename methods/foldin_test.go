package methods_test

import (
	"math"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// checkFoldIn asserts that each stored user state is exactly what her
// device computes from the public model and her own training ratings.
func checkFoldIn(t *testing.T, m *model.Model, states []model.UserState, train *ratings.Matrix) {
	t.Helper()
	for _, st := range states {
		u, _ := train.Users.Lookup(st.User)
		ids, fv := train.UserRatings(u)
		again, err := m.FoldInUser(st.User, ids, fv)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(again.Bias-st.Bias) > 1e-12 {
			t.Errorf("user %s: fold-in bias %v, state %v", st.User, again.Bias, st.Bias)
		}
		for c := range again.Row {
			if math.Abs(again.Row[c]-st.Row[c]) > 1e-12 {
				t.Fatalf("user %s: row differs from fold-in", st.User)
			}
		}
	}
}
