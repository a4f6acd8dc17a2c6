package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// batchChunk is how many users one worker scores before handing its
// output to the writer.
const batchChunk = 64

// batchRec is one user's list in recommend --all-users --json (one JSON
// object per line).
type batchRec struct {
	User            string                 `json:"user"`
	Recommendations []model.Recommendation `json:"recommendations"`
}

// recommendAll writes the top k of every user of r, each scored from her
// own ratings in r through the public model (fold-in), as TSV lines
// "user rank item score title" under a header, or JSON lines. Users are
// scored on all cores in chunks and written in the file's user order; at
// most a few chunks per worker are held at once, so memory stays bounded
// whatever the number of users.
func recommendAll(ctx context.Context, m *model.Model, r *ratings.Matrix, k int, titles map[string]string, jsonOut bool, workers int, out io.Writer) (users int, err error) {
	if m.Dense != nil {
		return 0, fmt.Errorf("the %s model releases a dense users × items matrix: it cannot score users from their ratings", m.Method)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	nChunks := (r.NumUsers() + batchChunk - 1) / batchChunk
	bs := m.NewBatchScorer()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// results[c] receives chunk c's output; the writer reads them in order.
	// tokens bounds the chunks scored but not yet written.
	results := make([]chan chunkResult, nChunks)
	for c := range results {
		results[c] = make(chan chunkResult, 1)
	}
	tokens := make(chan struct{}, 2*workers)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			scores := make([][]float64, batchChunk)
			for j := range scores {
				scores[j] = make([]float64, m.NumItems())
			}
			for c := range next {
				buf, n, err := recommendChunk(m, bs, r, c, k, titles, jsonOut, scores)
				results[c] <- chunkResult{buf, n, err}
			}
		})
	}
	go feedChunks(ctx, nChunks, tokens, next)
	bw := bufio.NewWriterSize(out, 1<<16)
	if !jsonOut {
		bw.WriteString("user\trank\titem\tscore\ttitle\n")
	}
	users, err = writeChunks(ctx, cancel, results, tokens, bw)
	wg.Wait()
	if err != nil {
		return users, err
	}
	if ferr := bw.Flush(); ferr != nil {
		return users, fmt.Errorf("writing recommendations: %w", ferr)
	}
	return users, nil
}

// chunkResult is one chunk's output lines and users, or its error.
type chunkResult struct {
	buf   []byte
	users int
	err   error
}

// feedChunks hands the chunks 0 … n−1 to the workers in order, each once
// a token is free, and closes next; it stops when ctx is done.
func feedChunks(ctx context.Context, n int, tokens chan<- struct{}, next chan<- int) {
	defer close(next)
	for c := range n {
		select {
		case tokens <- struct{}{}:
		case <-ctx.Done():
			return
		}
		select {
		case next <- c:
		case <-ctx.Done():
			return
		}
	}
}

// writeChunks writes the chunks' outputs in order, freeing a token after
// each; on the first error (a chunk's, the context's or the writer's) it
// cancels the workers and returns it.
func writeChunks(ctx context.Context, cancel context.CancelFunc, results []chan chunkResult, tokens <-chan struct{}, bw *bufio.Writer) (users int, err error) {
	for c := range results {
		var res chunkResult
		select {
		case res = <-results[c]:
		case <-ctx.Done():
		}
		if err = ctx.Err(); err == nil {
			err = res.err
		}
		if err == nil {
			if _, werr := bw.Write(res.buf); werr != nil {
				err = fmt.Errorf("writing recommendations: %w", werr)
			}
		}
		if err != nil {
			cancel()
			return users, err
		}
		users += res.users
		<-tokens
	}
	return users, nil
}

// recommendChunk scores users [c·batchChunk, (c+1)·batchChunk) of r;
// scores holds batchChunk rows of NumItems.
func recommendChunk(m *model.Model, bs *model.BatchScorer, r *ratings.Matrix, c, k int, titles map[string]string, jsonOut bool, scores [][]float64) ([]byte, int, error) {
	users, states, err := foldInChunk(m, r, c)
	if err != nil {
		return nil, 0, err
	}
	// All the chunk's users at once (model.BatchScorer: a large item–item
	// model is read contiguously, not row by scattered row).
	bs.Scores(states, scores[:len(users)])
	var buf []byte
	for j, u := range users {
		predictFromScores(m, scores[j])
		recs := topRecommendations(m, scores[j], k, u.skip, titles)
		if jsonOut {
			b, err := json.Marshal(batchRec{User: u.id, Recommendations: recs})
			if err != nil {
				return nil, 0, err
			}
			buf = append(append(buf, b...), '\n')
			continue
		}
		buf = appendRecsTSV(buf, u.id, recs)
	}
	return buf, len(users), nil
}

// chunkUser is a user of a chunk: her ID and the items she rated (left
// out of her list).
type chunkUser struct {
	id   string
	skip []int32
}

// foldInChunk is chunk c's users with ratings and their states, each
// folded in from her own ratings in r.
func foldInChunk(m *model.Model, r *ratings.Matrix, c int) ([]chunkUser, []*model.UserState, error) {
	var users []chunkUser
	var states []*model.UserState
	for u := int32(c * batchChunk); int(u) < min((c+1)*batchChunk, r.NumUsers()); u++ {
		if r.UserCount(u) == 0 {
			continue
		}
		id := r.Users.Name(u)
		items, vals := r.UserRatings(u)
		st, err := m.FoldInUser(id, items, vals)
		if err != nil {
			return nil, nil, fmt.Errorf("user %q: %w", id, err)
		}
		users = append(users, chunkUser{id, m.Indices(items)})
		states = append(states, st)
	}
	return users, states, nil
}

// topRecommendations is the k best items of scores outside skip, titled
// by the model's catalogue, else by titles.
func topRecommendations(m *model.Model, scores []float64, k int, skip []int32, titles map[string]string) []model.Recommendation {
	top := model.TopIndices(scores, k, skip)
	recs := make([]model.Recommendation, len(top))
	for q, i := range top {
		recs[q] = model.Recommendation{Item: m.Items[i], Score: scores[i]}
		if m.Titles != nil {
			recs[q].Title = m.Titles[i]
		}
		if recs[q].Title == "" && titles != nil {
			recs[q].Title = titles[recs[q].Item]
		}
	}
	return recs
}

// appendRecsTSV appends a user's list as "user rank item score title"
// lines.
func appendRecsTSV(buf []byte, user string, recs []model.Recommendation) []byte {
	for q, rec := range recs {
		buf = append(buf, user...)
		buf = append(buf, '\t')
		buf = strconv.AppendInt(buf, int64(q+1), 10)
		buf = append(buf, '\t')
		buf = append(buf, rec.Item...)
		buf = append(buf, '\t')
		buf = strconv.AppendFloat(buf, rec.Score, 'g', 6, 64)
		buf = append(buf, '\t')
		buf = append(buf, tsvField(rec.Title)...)
		buf = append(buf, '\n')
	}
	return buf
}

// predictFromScores turns a user's scores (Scores) into the model's
// predictions — what PredictFor gives, so the batch lists are those of
// privrec recommend --user ID --data FILE.
func predictFromScores(m *model.Model, out []float64) {
	if !m.Output.Rated() {
		return
	}
	sc, cl := m.Transform.Scale, m.Transform.Clamp
	for i, s := range out {
		if sc != nil {
			s = sc.Invert(s)
		}
		if cl != nil {
			s = min(max(s, cl.Min), cl.Max)
		}
		out[i] = s
	}
}

// tsvField replaces the tabs and line breaks a title may hold.
func tsvField(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\t' || s[i] == '\n' || s[i] == '\r' {
			b := []byte(s)
			for j := range b {
				if b[j] == '\t' || b[j] == '\n' || b[j] == '\r' {
					b[j] = ' '
				}
			}
			return string(b)
		}
	}
	return s
}

// warnUnknownItems logs how many ratings of r name items the model does
// not know (fold-in ignores them).
func warnUnknownItems(m *model.Model, r *ratings.Matrix, file string) {
	n := 0
	for i := range int32(r.NumItems()) {
		if _, ok := m.ItemIndex(r.Items.Name(i)); !ok {
			n += r.ItemCount(i)
		}
	}
	if n > 0 {
		slog.Warn("ratings of items outside the model's catalogue are ignored", "file", file, "ratings", n)
	}
}
