// Package topn provides the top-N recommendation models of privrec: models
// that rank items for a user from the items she interacted with, rather
// than predict her ratings. A model tuned for rating error is not a
// recommender (Cremonesi, Koren and Turrin, "Performance of Recommender
// Algorithms on Top-N Recommendation Tasks", RecSys 2010); these models are
// trained and judged on ranking.
//
//   - Popularity: items by how many users interacted with them.
//   - EASE (Steck, "Embarrassingly Shallow Autoencoders for Sparse Data",
//     WWW 2019): a closed-form item–item model from the Gram matrix.
//   - iALS (Hu, Koren and Volinsky, "Collaborative Filtering for Implicit
//     Feedback Datasets", ICDM 2008), with the regularisation of Rendle,
//     Krichene, Zhang and Koren ("Revisiting the Performance of iALS on
//     Item Recommendation Benchmarks", RecSys 2022), solved by conjugate
//     gradient (Takács, Pilászy and Tikk, RecSys 2011).
//
// The building blocks are values of their own — the per-user contribution
// to a Gram matrix, the Gram itself, the EASE solve, the iALS half-steps —
// so the private methods (package methods: dp-popularity, dp-ease,
// dp-ials) compute the same statistics from bounded per-user contributions,
// release them once through an accounted mechanism, and post-process.
// dp-ials' step statistic is a statistic.Contribution (StepStatistic), so
// any engine sums it: the in-process kernel here, or privrec-beam's
// workers.
//
// Every model is an ordinary model.Model: a user folds in from her own
// history on her side (model.FoldInUser) through the rules this package
// registers ("indicator" and "implicit").
package topn
