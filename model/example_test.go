package model_test

import (
	"bytes"
	"fmt"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

func Example() {
	b := ratings.NewBuilder(ratings.DupError)
	b.Add("alice", "film-a", 5, 1)
	b.Add("alice", "film-b", 1, 2)
	b.Add("bob", "film-a", 4, 3)
	data, _ := b.Build()

	// A solver fills in the factors; here a rank-one model by hand.
	m := model.New("by-hand", data)
	m.Rank = 1
	m.Offset = 3
	m.U = []float64{1, 0.5}  // alice, bob
	m.V = []float64{1.5, -2} // film-a, film-b

	var file bytes.Buffer
	m.Write(&file)
	loaded, _ := model.Read(&file)
	bob, _ := loaded.UserIndex("bob")
	filmB, _ := loaded.ItemIndex("film-b")
	fmt.Printf("bob × film-b: %.1f\n", loaded.Predict(bob, filmB))
	fmt.Println("for bob:", loaded.Recommend(bob, 5, nil)[0].Item)
	// Output:
	// bob × film-b: 2.0
	// for bob: film-b
}
