package service

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/privrec/privrec/service/store"
)

// op is one write waiting for a transaction: an enrolment or a report.
type op struct {
	enrol *store.NewUser
	sub   *store.Submission
	res   store.Result
	err   error
	done  chan struct{}
}

// batcher is the single writer: group commit. It takes every write queued
// while the previous transaction was committing and runs them in one
// transaction, then answers each. A write is acknowledged only after the
// commit of its batch returned (on disk: SQLite synchronous=FULL,
// PostgreSQL synchronous_commit), so every acknowledged report survives
// a crash; one fsync is shared by the whole batch.
type batcher struct {
	st      store.Store
	in      chan *op
	max     int
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
	m       *metrics
	// commits and ops count committed transactions and the writes in them.
	commits, ops atomic.Int64
	// wrote learns the outcome of every transaction (readiness).
	wrote func(error)
}

var errClosed = errors.New("service: shutting down")

// newBatcher starts writers goroutines taking batches from one queue:
// always one for SQLite (a single writer); PostgreSQL may run several
// transactions concurrently (each locks its users' ledger rows, in ID
// order, so batches touching the same user serialize).
func newBatcher(st store.Store, max, writers int, m *metrics, wrote func(error)) *batcher {
	b := &batcher{st: st, in: make(chan *op, max*writers), max: max, quit: make(chan struct{}), stopped: make(chan struct{}), m: m, wrote: wrote}
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.loop()
		}()
	}
	go func() {
		wg.Wait()
		close(b.stopped)
	}()
	return b
}

// do queues o and waits for its batch to commit. Once queued, o is waited
// for even if ctx ends: the write may commit, and its caller learns the
// outcome (a client that hung up retries with the same ID and gets the
// original acknowledgement).
func (b *batcher) do(ctx context.Context, o *op) error {
	o.done = make(chan struct{})
	select {
	case b.in <- o:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.quit:
		return errClosed
	}
	<-o.done
	return o.err
}

// close stops the writer after the writes already queued; callers must
// have stopped queueing (the HTTP server has shut down).
func (b *batcher) close() {
	b.once.Do(func() { close(b.quit) })
	<-b.stopped
}

func (b *batcher) loop() {
	batch := make([]*op, 0, b.max)
	for {
		var first *op
		select {
		case first = <-b.in:
		case <-b.quit:
			// Answer anything still queued, then stop.
			for {
				select {
				case o := <-b.in:
					b.run([]*op{o})
				default:
					return
				}
			}
		}
		batch = FillBatch(append(batch[:0], first), b.in, b.max)
		b.run(batch)
	}
}

// run commits a batch and answers its writes. When the transaction fails,
// each write is retried in a transaction of its own, so one bad write
// cannot fail the others.
func (b *batcher) run(batch []*op) {
	start := time.Now()
	err := b.commit(batch)
	if err == nil || len(batch) == 1 {
		b.wrote(err) // a failed batch is judged by its retries
	}
	b.m.commitSeconds.Observe(time.Since(start).Seconds())
	b.m.batchSize.Observe(float64(len(batch)))
	if err != nil && len(batch) > 1 {
		b.m.batchRetries.Inc()
		for _, o := range batch {
			o.res = store.Result{}
			o.err = b.commit([]*op{o})
			b.wrote(o.err)
		}
	} else if err != nil {
		batch[0].err = err
	} else {
		b.commits.Add(1)
		b.ops.Add(int64(len(batch)))
	}
	for _, o := range batch {
		close(o.done)
	}
}

func (b *batcher) commit(batch []*op) error {
	// The transaction's context is not any request's: a client hanging up
	// must not abort the others' writes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.st.Update(ctx, func(tx store.Tx) error {
		var subs []store.Submission
		for _, o := range batch {
			switch {
			case o.enrol != nil:
				if err := tx.CreateUser(ctx, *o.enrol); err != nil {
					return err
				}
			case o.sub != nil:
				subs = append(subs, *o.sub)
			}
		}
		if len(subs) == 0 {
			return nil
		}
		res, err := tx.SubmitBatch(ctx, subs)
		if err != nil {
			return err
		}
		k := 0
		for _, o := range batch {
			if o.sub != nil {
				o.res = res[k]
				k++
			}
		}
		return nil
	})
}

// FillBatch appends to batch what is waiting on in, without waiting, up
// to max in all: the writes a group commit takes together.
func FillBatch[T any](batch []T, in <-chan T, max int) []T {
	for len(batch) < max {
		select {
		case v := <-in:
			batch = append(batch, v)
		default:
			return batch
		}
	}
	return batch
}
