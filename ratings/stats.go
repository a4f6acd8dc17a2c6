package ratings

import (
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/gonum/stat"
)

// Stats summarises a matrix: shape, density, the rating distribution and
// how many ratings users and items have. The JSON field names are the
// contract of 'privrec data stats --json' (docs/DATA.md).
type Stats struct {
	Users      int     `json:"users"`
	Items      int     `json:"items"`
	Ratings    int     `json:"ratings"`
	Density    float64 `json:"density"`
	RatingMin  float64 `json:"rating_min"`
	RatingMax  float64 `json:"rating_max"`
	RatingMean float64 `json:"rating_mean"`
	HasTime    bool    `json:"has_time"`
	// Histogram lists every distinct rating value when there are at most
	// MaxDistinct of them, else HistogramBins equal-width bins over
	// [RatingMin, RatingMax] (the last bin is closed).
	Histogram []Bin `json:"histogram"`
	// PerUser and PerItem describe the number of ratings per user and per
	// item (over users and items that appear in the ID maps).
	PerUser Quantiles `json:"per_user"`
	PerItem Quantiles `json:"per_item"`
}

// Bin is one histogram bar: a single value (Lo == Hi) or [Lo, Hi).
type Bin struct {
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Count int     `json:"count"`
}

// Quantiles of a count distribution (empirical quantiles: the smallest
// observed count with at least the given fraction at or below it).
type Quantiles struct {
	Min    float64 `json:"min"`
	P05    float64 `json:"p05"`
	P25    float64 `json:"p25"`
	Median float64 `json:"median"`
	P75    float64 `json:"p75"`
	P95    float64 `json:"p95"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

// MaxDistinct and HistogramBins shape Stats.Histogram.
const (
	MaxDistinct   = 32
	HistogramBins = 20
)

// Stats computes the summary (one pass over the values plus sorting the
// per-user and per-item counts).
func (m *Matrix) Stats() Stats {
	s := Stats{Users: m.NumUsers(), Items: m.NumItems(), Ratings: m.Len(), Density: m.Density(), HasTime: m.HasTime(), Histogram: []Bin{}}
	if m.Len() == 0 {
		return s
	}
	s.RatingMin, s.RatingMax = m.Range()
	s.RatingMin, s.RatingMax = short32(s.RatingMin), short32(s.RatingMax)
	s.RatingMean = m.Mean()
	// Distinct values by linear search with the last hit first: ratings
	// come from small sets (1..5, halves), where this beats a map.
	var distinct []float32
	var counts []int
	last := 0
	for _, v := range m.rowVal {
		if last < len(distinct) && distinct[last] == v {
			counts[last]++
			continue
		}
		k := slices.Index(distinct, v)
		if k < 0 {
			if len(distinct) == MaxDistinct {
				distinct = nil
				break
			}
			distinct = append(distinct, v)
			counts = append(counts, 0)
			k = len(distinct) - 1
		}
		counts[k]++
		last = k
	}
	if distinct != nil {
		for k, v := range distinct {
			s.Histogram = append(s.Histogram, Bin{Lo: short32(float64(v)), Hi: short32(float64(v)), Count: counts[k]})
		}
		slices.SortFunc(s.Histogram, func(a, b Bin) int {
			if a.Lo < b.Lo {
				return -1
			}
			return 1
		})
	} else {
		lo, hi := s.RatingMin, s.RatingMax
		w := (hi - lo) / HistogramBins
		s.Histogram = make([]Bin, HistogramBins)
		for k := range s.Histogram {
			s.Histogram[k] = Bin{Lo: lo + float64(k)*w, Hi: lo + float64(k+1)*w}
		}
		s.Histogram[HistogramBins-1].Hi = hi
		for _, v := range m.rowVal {
			k := min(int((float64(v)-lo)/w), HistogramBins-1)
			s.Histogram[k].Count++
		}
	}
	s.PerUser = countQuantiles(m.rowPtr)
	s.PerItem = countQuantiles(m.colPtr)
	return s
}

// short32 returns the float64 nearest the shortest decimal that identifies
// the float32 v (so a stored 2.72 prints as 2.72, not 2.7200000286).
func short32(v float64) float64 {
	f, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
	if err != nil {
		return v
	}
	return f
}

func countQuantiles(ptr []int64) Quantiles {
	n := len(ptr) - 1
	if n <= 0 {
		return Quantiles{}
	}
	x := make([]float64, n)
	for i := range n {
		x[i] = float64(ptr[i+1] - ptr[i])
	}
	slices.Sort(x)
	q := func(p float64) float64 { return stat.Quantile(p, stat.Empirical, x, nil) }
	return Quantiles{Min: x[0], P05: q(0.05), P25: q(0.25), Median: q(0.5), P75: q(0.75), P95: q(0.95), Max: x[n-1], Mean: math.Round(stat.Mean(x, nil)*1000) / 1000}
}
