package ratings

// Filter returns a new Matrix holding the ratings for which keep returns
// true, with the same ID maps and shape (users or items left without
// ratings stay, with empty rows/columns), so indices remain comparable
// between a matrix and its parts (e.g. a train/test split).
func (m *Matrix) Filter(keep func(e Entry) bool) *Matrix {
	rowPtr := make([]int64, m.NumUsers()+1)
	var rowCol []int32
	var rowVal []float32
	var rowT []int64
	for u := range int32(m.NumUsers()) {
		a, b := m.rowPtr[u], m.rowPtr[u+1]
		for k := a; k < b; k++ {
			e := Entry{User: u, Item: m.rowCol[k], Value: m.rowVal[k]}
			if m.rowT != nil {
				e.Time = m.rowT[k]
			}
			if keep(e) {
				rowCol = append(rowCol, e.Item)
				rowVal = append(rowVal, e.Value)
				if m.rowT != nil {
					rowT = append(rowT, e.Time)
				}
			}
		}
		rowPtr[u+1] = int64(len(rowCol))
	}
	if m.rowT != nil && rowT == nil {
		rowT = []int64{}
	}
	out, err := FromCSR(m.Users, m.Items, m.NumItems(), rowPtr, rowCol, rowVal, rowT)
	if err != nil {
		panic("ratings: Filter produced an inconsistent matrix: " + err.Error()) // unreachable: rows stay sorted
	}
	return out
}

// MapValues returns a copy whose every value is f(entry) (same pattern, same IDs).
func (m *Matrix) MapValues(f func(e Entry) float32) *Matrix {
	rowVal := make([]float32, len(m.rowVal))
	i := 0
	m.All(func(e Entry) bool { rowVal[i] = f(e); i++; return true })
	out, err := FromCSR(m.Users, m.Items, m.NumItems(), m.rowPtr, m.rowCol, rowVal, m.rowT)
	if err != nil {
		panic("ratings: MapValues produced an inconsistent matrix: " + err.Error()) // unreachable
	}
	return out
}

// Align re-expresses other in m's ID maps: ratings of users or items that m
// does not know are dropped and counted in the second result. Use it to
// evaluate a model trained on m against a test file read separately.
func (m *Matrix) Align(other *Matrix) (*Matrix, int) {
	b := NewBuilder(DupError)
	b.Users, b.Items = m.Users, m.Items // only known IDs are added, so the maps are not changed
	dropped := 0
	other.All(func(e Entry) bool {
		un, in := other.Users.Name(e.User), other.Items.Name(e.Item)
		if _, ok := m.Users.Lookup(un); !ok {
			dropped++
			return true
		}
		if _, ok := m.Items.Lookup(in); !ok {
			dropped++
			return true
		}
		_ = b.AddTimed(un, in, float64(e.Value), e.Time, other.HasTime(), 0)
		return true
	})
	out, err := b.Build()
	if err != nil {
		panic("ratings: Align of a valid matrix failed: " + err.Error()) // unreachable: other has no duplicates
	}
	return out, dropped
}
