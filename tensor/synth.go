package tensor

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/privrec/privrec/privacy/noise"
)

// Kind is a tensor decomposition: CP or Tucker.
type Kind string

const (
	// CP is the CANDECOMP/PARAFAC model x_ijk = Σ_r a_ir b_jr c_kr.
	CP Kind = "cp"
	// Tucker is x_ijk = Σ_pqt g_pqt a_ip b_jq c_kt with a d × d × d core.
	Tucker Kind = "tucker"
)

// ParseKind reads "cp" or "tucker".
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case CP, Tucker:
		return Kind(s), nil
	}
	return "", fmt.Errorf("tensor: unknown decomposition %q (want cp or tucker)", s)
}

// SynthConfig is the seed's synthetic setup (§5.1): a rank-d CP tensor
// with N(0, 1) factors whose columns are normalised to unit length, or a
// Tucker tensor with orthonormal factor columns and an N(0, 1) d × d × d
// core; the true tensor X̃ is min–max scaled to [0, 1]; Gaussian noise at
// the given SNR is added; a Missing fraction of all entries is hidden and
// the observed ones are split TrainFrac / (1 − TrainFrac).
type SynthConfig struct {
	Kind Kind
	Dims [3]int
	Rank int
	// SNR is sd(X̃)/σ: the noise is i.i.d. N(0, σ²) with σ the standard
	// deviation of the scaled true entries divided by SNR. The seed says only
	// "SNR is one"; this reading is ours. (Measuring the signal by ‖X̃‖_F
	// instead would count the arbitrary offset of the min–max scaling as
	// signal: noise 8× the signal's spread, and a constant predictor beats
	// every model.) 0 or +Inf: no noise.
	SNR float64
	// Missing is the fraction of all n1 n2 n3 entries left unobserved.
	Missing float64
	// TrainFrac is the share of observed entries used for training.
	TrainFrac float64
}

// PaperSynth is the seed's benchmark case: 20 × 20 × 20, rank 3, SNR 1,
// 50 % missing, 80/20 split.
func PaperSynth(kind Kind) SynthConfig {
	return SynthConfig{Kind: kind, Dims: [3]int{20, 20, 20}, Rank: 3, SNR: 1, Missing: 0.5, TrainFrac: 0.8}
}

// Synth is a generated instance.
type Synth struct {
	Config SynthConfig
	// Truth is the dense min–max scaled noise-free tensor, index (i·n2 + j)·n3 + k.
	Truth []float64
	// Train holds noisy observations; Test holds the noise-free truth at
	// the held-out observed positions (RMSE is against X̃, as in the seed);
	// TestNoisy holds the noisy values at the same positions.
	Train, Test, TestNoisy *Tensor
	// Sigma is the noise standard deviation used.
	Sigma float64
}

// At returns the true value at (i, j, k).
func (s *Synth) At(i, j, k int) float64 {
	d := s.Config.Dims
	return s.Truth[(i*d[1]+j)*d[2]+k]
}

// Validate checks a configuration.
func (c SynthConfig) Validate() error {
	if _, err := ParseKind(string(c.Kind)); err != nil {
		return err
	}
	for m, d := range c.Dims {
		if d <= 0 || d > 1<<12 {
			return fmt.Errorf("tensor: synthetic dimension %d is %d, want 1..4096", m+1, d)
		}
	}
	if c.Dims[0]*c.Dims[1]*c.Dims[2] > 1<<26 {
		return fmt.Errorf("tensor: synthetic tensor %v has more than 2^26 entries", c.Dims)
	}
	if c.Rank <= 0 || c.Rank > min(c.Dims[0], c.Dims[1], c.Dims[2]) && c.Kind == Tucker {
		return fmt.Errorf("tensor: rank %d invalid for %s of shape %v (Tucker needs rank ≤ every dimension)", c.Rank, c.Kind, c.Dims)
	}
	if c.Rank > 64 {
		return fmt.Errorf("tensor: rank %d too large (max 64)", c.Rank)
	}
	if math.IsNaN(c.SNR) || c.SNR < 0 {
		return fmt.Errorf("tensor: SNR %v must be ≥ 0 (0 = no noise)", c.SNR)
	}
	if !(c.Missing >= 0 && c.Missing < 1) {
		return fmt.Errorf("tensor: missing ratio %v not in [0, 1)", c.Missing)
	}
	if !(c.TrainFrac > 0 && c.TrainFrac < 1) {
		return fmt.Errorf("tensor: train fraction %v not in (0, 1)", c.TrainFrac)
	}
	return nil
}

// Synthesize draws one instance from src.
func Synthesize(c SynthConfig, src *noise.Source) (*Synth, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	d := c.Rank
	n1, n2, n3 := c.Dims[0], c.Dims[1], c.Dims[2]
	factor := func(n int) []float64 {
		f := make([]float64, n*d)
		for x := range f {
			f[x] = src.NormFloat64()
		}
		if c.Kind == Tucker {
			return orthonormalColumns(f, n, d)
		}
		for r := range d { // unit-length columns
			var s float64
			for i := range n {
				s += f[i*d+r] * f[i*d+r]
			}
			s = math.Sqrt(s)
			for i := range n {
				f[i*d+r] /= s
			}
		}
		return f
	}
	A, B, C := factor(n1), factor(n2), factor(n3)
	var G []float64
	if c.Kind == Tucker {
		G = make([]float64, d*d*d)
		for x := range G {
			G[x] = src.NormFloat64()
		}
	}
	truth := make([]float64, n1*n2*n3)
	for i := range n1 {
		for j := range n2 {
			for k := range n3 {
				truth[(i*n2+j)*n3+k] = Eval(c.Kind, d, A[i*d:i*d+d], B[j*d:j*d+d], C[k*d:k*d+d], G)
			}
		}
	}
	lo, hi := truth[0], truth[0]
	for _, v := range truth {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi > lo {
		for x := range truth {
			truth[x] = (truth[x] - lo) / (hi - lo)
		}
	}
	var sigma float64
	if c.SNR > 0 && !math.IsInf(c.SNR, 1) {
		var mean, ss float64
		for _, v := range truth {
			mean += v
		}
		mean /= float64(len(truth))
		for _, v := range truth {
			ss += (v - mean) * (v - mean)
		}
		sigma = math.Sqrt(ss/float64(len(truth))) / c.SNR
	}
	noisy := make([]float64, len(truth))
	for x, v := range truth {
		noisy[x] = v + sigma*src.NormFloat64()
	}
	perm := src.Perm(len(truth))
	nObs := len(truth) - int(math.Round(c.Missing*float64(len(truth))))
	nTrain := int(math.Round(c.TrainFrac * float64(nObs)))
	if nTrain == 0 || nTrain == nObs {
		return nil, fmt.Errorf("tensor: %d observed entries cannot be split %v/%v", nObs, c.TrainFrac, 1-c.TrainFrac)
	}
	s := &Synth{Config: c, Truth: truth, Sigma: sigma,
		Train: New(c.Dims, nTrain), Test: New(c.Dims, nObs-nTrain), TestNoisy: New(c.Dims, nObs-nTrain)}
	for n, x := range perm[:nObs] {
		i, j, k := int32(x/(n2*n3)), int32(x/n3%n2), int32(x%n3)
		if n < nTrain {
			s.Train.Add(i, j, k, noisy[x])
		} else {
			s.Test.Add(i, j, k, truth[x])
			s.TestNoisy.Add(i, j, k, noisy[x])
		}
	}
	return s, nil
}

// Eval is the model value at one position given the factor rows a, b, c
// (length d) and, for Tucker, the core G (index (p·d + q)·d + t).
func Eval(kind Kind, d int, a, b, c, G []float64) float64 {
	var s float64
	if kind == CP {
		for r := range d {
			s += a[r] * b[r] * c[r]
		}
		return s
	}
	for p := range d {
		for q := range d {
			ab := a[p] * b[q]
			g := G[(p*d+q)*d : (p*d+q)*d+d]
			for t := range d {
				s += ab * g[t] * c[t]
			}
		}
	}
	return s
}

// orthonormalColumns returns the Q factor of the n × d row-major matrix f
// (gonum's QR; n ≥ d).
func orthonormalColumns(f []float64, n, d int) []float64 {
	var qr mat.QR
	qr.Factorize(mat.NewDense(n, d, f))
	var q mat.Dense
	qr.QTo(&q)
	out := make([]float64, n*d)
	for i := range n {
		for r := range d {
			out[i*d+r] = q.At(i, r)
		}
	}
	return out
}
