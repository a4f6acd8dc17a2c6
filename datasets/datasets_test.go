package datasets

import (
	"context"
	"fmt"
	"testing"
)

func TestRestaurant(t *testing.T) {
	for _, col := range []string{"rating", "food", "service"} {
		m, err := Restaurant(context.Background(), col)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := m.Range()
		if m.NumUsers() != 138 || m.NumItems() != 130 || m.Len() != 1161 || lo != 0 || hi != 2 {
			t.Fatalf("%s: %v, range [%g, %g]; want 138 × 130, 1161 ratings in [0, 2]", col, m, lo, hi)
		}
	}
}

func TestRestaurantNames(t *testing.T) {
	names, err := RestaurantNames()
	if err != nil {
		t.Fatal(err)
	}
	m, err := Restaurant(context.Background(), "rating")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range m.Items.Names() {
		if names[id] == "" {
			t.Fatalf("restaurant %s has no name", id)
		}
	}
}

func ExampleRestaurant() {
	m, err := Restaurant(context.Background(), "rating")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.NumUsers(), "users,", m.NumItems(), "restaurants,", m.Len(), "ratings")
	// Output: 138 users, 130 restaurants, 1161 ratings
}
