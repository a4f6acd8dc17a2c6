// Package pipeline sums privrec's statistics on Apache Beam: an engine
// (statistic.Engine) whose Sum runs one pipeline — read the ratings with
// privrec's own parsers (gzip included) → group by user → each user's
// contribution, computed on the worker by the statistic package's code
// for the method's public plan → combine per block of coordinates → the
// pre-noise sum, written to a work directory the driver reads.
//
// The noise is not added here. The driver (methods.Train, through
// methods.Env.Engine) adds it once, after the pipeline has finished, with
// privrec's sampler: a runner that retries a bundle re-computes a part of
// a sum, never a noise draw. A second run of the pipeline is a second
// release and is accounted as one.
//
// Rows the parsers refuse (a malformed line, a repeated (user, item))
// reach the pipeline's error output with their source and position and
// enter no sum; the driver then fails the run, naming how many were
// refused, before any noise is drawn.
package pipeline
