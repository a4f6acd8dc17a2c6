package ratingio_test

import (
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/privrec/privrec/ratingio"
)

func ExampleReadContext() {
	data := "1::1193::5::978300760\n1::661::3::978302109\n2::1193::4.5::978298413\n"
	m, err := ratingio.ReadContext(context.Background(), strings.NewReader(data), "ratings.dat", ratingio.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m)
	ratingio.WriteTSV(os.Stdout, m)
	// Output:
	// 2 users × 2 items, 3 ratings
	// 1	1193	5	978300760
	// 1	661	3	978302109
	// 2	1193	4.5	978298413
}

func ExampleParseError() {
	data := "1\t10\t4\n2\t10\tfour\n"
	_, err := ratingio.ReadContext(context.Background(), strings.NewReader(data), "u.tsv", ratingio.Options{})
	var pe *ratingio.ParseError
	if errors.As(err, &pe) {
		fmt.Println(pe.Line, pe.Column, pe.Field)
	}
	fmt.Println(err)
	// Output:
	// 2 3 rating
	// u.tsv:2: column 3 (rating): "four" is not a number
}

// A damaged gzip file is a *ParseError too; it unwraps to the
// decompressor's error.
func ExampleParseError_gzip() {
	_, err := ratingio.ReadContext(context.Background(), strings.NewReader("\x1f\x8b\bA00000000000"), "u.data", ratingio.Options{})
	var ce flate.CorruptInputError
	fmt.Println(err)
	fmt.Println(errors.As(err, &ce))
	// Output:
	// u.data: damaged gzip file: corrupt compressed data at byte 15 of the compressed stream
	// true
}

func ExampleWriteBinary() {
	data := "userID,placeID,rating,food_rating,service_rating\nU1077,135085,2,1,0\nU1078,135085,1,2,2\n"
	m, err := ratingio.ReadContext(context.Background(), strings.NewReader(data), "rating_final.csv", ratingio.Options{Column: "food"})
	if err != nil {
		fmt.Println(err)
		return
	}
	var b strings.Builder
	if err := ratingio.WriteBinary(&b, m); err != nil {
		fmt.Println(err)
		return
	}
	back, err := ratingio.ReadContext(context.Background(), strings.NewReader(b.String()), "rc.bin", ratingio.Options{})
	fmt.Println(back, err, back.Fingerprint() == m.Fingerprint())
	// Output:
	// 2 users × 1 items, 2 ratings <nil> true
}
