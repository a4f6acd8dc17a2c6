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
	nU := r.NumUsers()
	nChunks := (nU + batchChunk - 1) / batchChunk
	bs := m.NewBatchScorer()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		buf   []byte
		users int
		err   error
	}
	// results[c] receives chunk c's output; the writer reads them in order.
	// tokens bounds the chunks scored but not yet written.
	results := make([]chan result, nChunks)
	for c := range results {
		results[c] = make(chan result, 1)
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
				results[c] <- result{buf, n, err}
			}
		})
	}
	go func() {
		defer close(next)
		for c := range nChunks {
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
	}()
	bw := bufio.NewWriterSize(out, 1<<16)
	if !jsonOut {
		bw.WriteString("user\trank\titem\tscore\ttitle\n")
	}
	for c := range nChunks {
		var res result
		select {
		case res = <-results[c]:
		case <-ctx.Done():
		}
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = res.err
		}
		if err == nil {
			if _, werr := bw.Write(res.buf); werr != nil {
				err = fmt.Errorf("writing recommendations: %w", werr)
			}
		}
		if err != nil {
			cancel()
			break
		}
		users += res.users
		<-tokens
	}
	wg.Wait()
	if err != nil {
		return users, err
	}
	if ferr := bw.Flush(); ferr != nil {
		return users, fmt.Errorf("writing recommendations: %w", ferr)
	}
	return users, nil
}

// recommendChunk scores users [c·batchChunk, (c+1)·batchChunk) of r;
// scores holds batchChunk rows of NumItems.
func recommendChunk(m *model.Model, bs *model.BatchScorer, r *ratings.Matrix, c, k int, titles map[string]string, jsonOut bool, scores [][]float64) ([]byte, int, error) {
	type user struct {
		id   string
		st   *model.UserState
		skip []int32
	}
	var users []user
	for u := int32(c * batchChunk); int(u) < min((c+1)*batchChunk, r.NumUsers()); u++ {
		if r.UserCount(u) == 0 {
			continue
		}
		id := r.Users.Name(u)
		items, vals := r.UserRatings(u)
		st, err := m.FoldInUser(id, items, vals)
		if err != nil {
			return nil, 0, fmt.Errorf("user %q: %w", id, err)
		}
		skip := m.Indices(items)
		users = append(users, user{id, st, skip})
	}
	states := make([]*model.UserState, len(users))
	for j, u := range users {
		states[j] = u.st
	}
	// All the chunk's users at once (model.BatchScorer: a large item–item
	// model is read contiguously, not row by scattered row).
	bs.Scores(states, scores[:len(users)])
	var buf []byte
	for j, u := range users {
		predictFromScores(m, scores[j])
		top := model.TopIndices(scores[j], k, u.skip)
		recs := make([]model.Recommendation, len(top))
		for q, i := range top {
			recs[q] = model.Recommendation{Item: m.Items[i], Score: scores[j][i]}
			if m.Titles != nil {
				recs[q].Title = m.Titles[i]
			}
			if recs[q].Title == "" && titles != nil {
				recs[q].Title = titles[recs[q].Item]
			}
		}
		if jsonOut {
			b, err := json.Marshal(batchRec{User: u.id, Recommendations: recs})
			if err != nil {
				return nil, 0, err
			}
			buf = append(append(buf, b...), '\n')
			continue
		}
		for q, rec := range recs {
			buf = append(buf, u.id...)
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
	}
	return buf, len(users), nil
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
