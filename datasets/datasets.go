// Package datasets embeds the small public rating data privrec ships for
// its demo: the UCI restaurant–consumer ratings (CC BY 4.0, see
// ATTRIBUTION.md). Larger benchmark data is never embedded; experiments
// read it from a data directory.
package datasets

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"fmt"

	"github.com/privrec/privrec/ratingio"
	"github.com/privrec/privrec/ratings"
)

//go:embed uci_restaurant_ratings.csv
var restaurantCSV []byte

//go:embed uci_restaurant_names.csv
var restaurantNamesCSV []byte

// Attribution is the credit line the CC BY 4.0 licence asks for.
const Attribution = `Restaurant & consumer data, UCI Machine Learning Repository (dataset 232), ` +
	`Vargas-Govea, González-Serna and Ponce-Medellín, CC BY 4.0`

// RestaurantCSV returns the raw embedded rating_final.csv (a copy).
func RestaurantCSV() []byte { return bytes.Clone(restaurantCSV) }

// Restaurant reads the embedded restaurant–consumer ratings (138 users ×
// 130 restaurants, 1,161 ratings in {0, 1, 2}); column is "rating"
// (overall), "food" or "service".
func Restaurant(ctx context.Context, column string) (*ratings.Matrix, error) {
	m, err := ratingio.ReadContext(ctx, bytes.NewReader(restaurantCSV), "uci_restaurant_ratings.csv",
		ratingio.Options{Format: "uci-rc", Column: column})
	if err != nil {
		return nil, fmt.Errorf("embedded restaurant data: %w", err)
	}
	return m, nil
}

// RestaurantNames maps placeID to the restaurant's name.
func RestaurantNames() (map[string]string, error) {
	recs, err := csv.NewReader(bytes.NewReader(restaurantNamesCSV)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("embedded restaurant names: %w", err)
	}
	names := make(map[string]string, len(recs))
	for _, r := range recs[1:] {
		names[r[0]] = r[1]
	}
	return names, nil
}
