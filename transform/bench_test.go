package transform

import (
	"context"
	"testing"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/synth"
)

var benchData *ratings.Matrix

// bench10M is seed 001's synthetic set at 125 000 users: 10 M ratings.
func bench10M(b *testing.B) *ratings.Matrix {
	b.Helper()
	if benchData == nil {
		c := synth.RankOneDefaults()
		c.Users = 125_000
		c.Noise = 0.5
		d, err := synth.RankOne(context.Background(), c, 1)
		if err != nil {
			b.Fatal(err)
		}
		benchData = d.Observed
	}
	return benchData
}

func BenchmarkHoldOut10M(b *testing.B) {
	m := bench10M(b)
	for b.Loop() {
		HoldOut(m, 0.01, 1)
	}
}

func BenchmarkHoldOutPerUser10M(b *testing.B) {
	m := bench10M(b)
	for b.Loop() {
		HoldOutPerUser(m, 10, 1)
	}
}

func BenchmarkCapPerUser10M(b *testing.B) {
	m := bench10M(b)
	for b.Loop() {
		CapPerUser(m, 40, 1)
	}
}

func BenchmarkTopItems10M(b *testing.B) {
	m := bench10M(b)
	for b.Loop() {
		TopItems(m, 200)
	}
}

// BenchmarkBiScaleSweeps10M times 10 bi-scaling sweeps (plus the final
// transform and check) on 10 M ratings.
func BenchmarkBiScaleSweeps10M(b *testing.B) {
	m := bench10M(b)
	for b.Loop() {
		BiScale(m, 10)
	}
}
