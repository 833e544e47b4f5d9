package redisstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
)

var (
	retryScript   = redis.NewScript(lua.Script("handoff_retry.lua"))
	promoteScript = redis.NewScript(lua.Script("handoff_promote.lua"))
	deadScript    = redis.NewScript(lua.Script("handoff_dead.lua"))
	claimScript   = redis.NewScript(lua.Script("handoff_claim.lua"))
	oldestScript  = redis.NewScript(lua.Script("handoff_oldest.lua"))
)

// Config configures a Queue.
type Config struct {
	// Stream names the queue: the key of its stream. Its delayed set,
	// dead-letter stream and retried set are the keys Stream+":delayed",
	// Stream+":dead" and Stream+":retried". A name without a hash tag gets
	// one around it ("orders" becomes "{orders}", "orders{}" becomes
	// "{orders{}}"), so that the four keys
	// share a Redis Cluster slot. As for Redis Cluster, a hash tag is the
	// text between the first '{' and the first '}' after it, when there is
	// any: empty braces are none. A name without one that begins with '}'
	// cannot be given one and is refused (stock.ErrInvalid). Required.
	Stream string
	// Group is the consumer group every Source of the queue reads in.
	// Zero means "stockguard".
	Group string
	// Redelivery is how long a delivery may stay unacknowledged before
	// another Fetch (of any Source) claims it and delivers it again. It
	// must exceed the longest a consumer takes to settle a batch. Zero
	// means 30s.
	Redelivery time.Duration
	// Block is the longest one XREADGROUP waits for new messages before
	// Fetch looks for due retries and abandoned deliveries again. Zero
	// means 100ms.
	Block time.Duration
}

// Queue is a hand-off queue on a Redis stream read by one consumer group:
// a handoff.Publisher, and the factory of its Sources. It is safe for
// concurrent use.
type Queue struct {
	rdb                            redis.UniversalClient
	stream, delayed, dead, retried string
	group                          string
	redelivery, block              time.Duration

	// claiming is held by the one claim of the queue's Sources under way;
	// claimAt, guarded by it, is where their claims are in their pass
	// over the group's pending entries (see claim).
	claiming sync.Mutex
	claimAt  claimPlace
}

// New returns the Queue cfg names, creating its stream and consumer
// group if they do not exist.
func New(ctx context.Context, rdb redis.UniversalClient, cfg Config) (*Queue, error) {
	if rdb == nil || cfg.Stream == "" {
		return nil, &stock.InvalidError{Field: "redisstream.Config.Stream", Reason: "needs a client and a stream name"}
	}
	if cfg.Redelivery < 0 || cfg.Block < 0 {
		return nil, &stock.InvalidError{Field: "redisstream.Config", Reason: "negative duration"}
	}
	if cfg.Group == "" {
		cfg.Group = "stockguard"
	}
	if cfg.Redelivery == 0 {
		cfg.Redelivery = 30 * time.Second
	}
	if cfg.Block == 0 {
		cfg.Block = 100 * time.Millisecond
	}
	base := cfg.Stream
	if !hasHashTag(base) {
		base = "{" + base + "}"
	}
	if !hasHashTag(base) { // it begins with '}': the tag around it would be empty
		return nil, &stock.InvalidError{Field: "redisstream.Config.Stream", Reason: fmt.Sprintf("%q has no hash tag and cannot be given one (it begins with '}')", cfg.Stream)}
	}
	q := &Queue{rdb: rdb, stream: base, delayed: base + ":delayed", dead: base + ":dead", retried: base + ":retried", group: cfg.Group,
		redelivery: max(cfg.Redelivery, time.Millisecond), block: max(cfg.Block, time.Millisecond), claimAt: claimPlace{from: passStart}}
	if err := q.createGroup(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// createGroup creates the stream, when absent, and its consumer group,
// when absent, reading from the stream's first entry (ID 0), so that no
// message already on the stream is passed over.
func (q *Queue) createGroup(ctx context.Context) error {
	err := q.rdb.XGroupCreateMkStream(ctx, q.stream, q.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

// isNoGroup tells whether err is Redis's answer to a command on a
// consumer group (or stream) that does not exist: the server lost its
// data (a restart without persistence, a flush, a failover to an empty
// replica), and XADD made the stream again without the group. A script
// reports it with its own prefix, hence the search.
func isNoGroup(err error) bool {
	return err != nil && strings.Contains(err.Error(), "NOGROUP")
}

// hasHashTag tells whether Redis Cluster hashes key by a hash tag: the
// first '{' and the first '}' after it, with at least one character
// between them. A key without one ("orders", "orders{}", "orders}{") is
// hashed whole, and so is each key made from it with a suffix: they land
// in different slots.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(key[i+1:], '}')
	return j > 0
}

// Publish appends m to the stream (XADD): once it returns nil, Redis has
// it (as durably as the server's persistence settings make it). Redis
// streams have no deduplication: a repeat is a second message, which the
// consumer settles once either way.
func (q *Queue) Publish(ctx context.Context, m handoff.Message) error {
	return q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.stream, Values: []any{"m", encode(m, 0, "")}}).Err()
}

// Source returns the consumer named consumer of the queue's group. Give
// each running consumer its own name (its node and a number): a name
// reused by a consumer that restarts is harmless, its old deliveries are
// claimed after Redelivery either way.
func (q *Queue) Source(consumer string) handoff.Source { return &source{q: q, name: consumer} }

// DeadLetter is one message in the queue's dead-letter stream.
type DeadLetter struct {
	// ID is its ID in the dead-letter stream; SourceID the message's ID
	// in the queue's stream.
	ID, SourceID string
	Message      handoff.Message
	// Reason is the text of the error it was dead-lettered with.
	Reason string
}

// DeadLetters returns up to count messages of the dead-letter stream,
// oldest first, from the ID after after ("" for the first).
func (q *Queue) DeadLetters(ctx context.Context, after string, count int64) ([]DeadLetter, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := q.rdb.XRangeN(ctx, q.dead, start, "+", count).Result()
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, 0, len(msgs))
	for _, x := range msgs {
		payload, _ := x.Values["m"].(string)
		m, _, _, _ := decode(payload)
		reason, _ := x.Values["reason"].(string)
		src, _ := x.Values["source_id"].(string)
		out = append(out, DeadLetter{ID: x.ID, SourceID: src, Message: m, Reason: reason})
	}
	return out, nil
}

// Len returns the number of messages the queue holds: published and not
// yet acknowledged or dead-lettered (those on the stream, read or not,
// and those waiting out a Retry's delay). Ack deletes a message from the
// stream, so this is the stream's length plus the delayed set's.
func (q *Queue) Len(ctx context.Context) (int64, error) {
	var onStream, delayed *redis.IntCmd
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		onStream = p.XLen(ctx, q.stream)
		delayed = p.ZCard(ctx, q.delayed)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return onStream.Val() + delayed.Val(), nil
}

// oldestDrops bounds the members of the retried set one call of the
// oldest script drops.
const oldestDrops = 100

// Oldest returns the Sent time of the oldest message not acknowledged or
// dead-lettered (handoff.OldestReader), read or not, retried or not: the
// earlier of the message at the head of the stream (Ack deletes a message
// from the stream) and the first of the retried set, where Retry keeps
// the Sent time of each copy it makes (a copy goes to the stream's end,
// behind newer messages, or waits out the Retry's delay) until the copy
// is acknowledged, dead-lettered or retried again. A member of the set
// whose copy is neither on the stream nor in the delayed set any more (it
// was settled by something that does not keep the set, such as Ack of a
// version before the set, during a rolling upgrade) is dropped by Oldest
// before it answers: it never answers a member it has not found live. One
// script call (a read of the stream's head and of the set's first
// members), and one more for each 100 such members dropped. A payload that does not
// decode (or has no Sent) is dated by the entry ID of the message as
// first published, the time Redis added it. It returns false when the
// queue holds no message.
func (q *Queue) Oldest(ctx context.Context) (time.Time, bool, error) {
	var r []string
	var err error
	for {
		r, err = oldestScript.Run(ctx, q.rdb, []string{q.stream, q.delayed, q.retried}, oldestDrops).StringSlice()
		if err != nil {
			return time.Time{}, false, err
		}
		if len(r) != 4 {
			return time.Time{}, false, fmt.Errorf("redisstream: unexpected reply of the oldest script: %v", r)
		}
		if r[3] != "1" {
			break
		}
	}
	var oldest time.Time
	var ok bool
	if id, payload := r[0], r[1]; id != "" {
		if oldest, err = sentOf(id, payload); err != nil {
			return time.Time{}, false, err
		}
		ok = true
	}
	if r[2] != "" {
		ms, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("redisstream: retried set score %q: %w", r[2], err)
		}
		if t := time.UnixMilli(int64(ms)); !ok || t.Before(oldest) {
			oldest, ok = t, true
		}
	}
	return oldest, ok, nil
}

// sentOf dates the message of entry id with payload: its Sent time, or
// when it has none (or does not decode) the time of the entry ID of the
// message as first published.
func sentOf(id, payload string) (time.Time, error) {
	m, _, of, err := decode(payload)
	if err == nil && !m.Sent.IsZero() {
		return m.Sent, nil
	}
	if of != "" {
		id = of
	}
	return idTime(id)
}

// idTime returns the time of a stream entry ID: when Redis added it.
func idTime(id string) (time.Time, error) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstream: entry ID %q: %w", id, err)
	}
	return time.UnixMilli(n), nil
}

// Keys returns the keys of the queue: its stream, delayed set,
// dead-letter stream and retried set (the Sent times of retried copies
// not yet settled, which Oldest reads).
func (q *Queue) Keys() (stream, delayed, dead, retried string) {
	return q.stream, q.delayed, q.dead, q.retried
}

type source struct {
	q     *Queue
	name  string
	swept time.Time // the last claim; Fetch is called by one goroutine at a time
}

// Fetch moves due retries back onto the stream, reads new messages
// (XREADGROUP) and claims deliveries left unacknowledged for Redelivery
// (XAUTOCLAIM), blocking for Block at a time until one is there or ctx
// ends. Due retries are moved before every read, so a retry whose delay
// has passed when a Fetch begins is back in the queue, busy or not, and
// the claim runs at least every Redelivery/2, busy or not, each going on
// from where the Queue's last claim stopped (see the package doc). When
// the consumer group is gone (Redis lost its data), Fetch creates it
// again, reading from the stream's first entry, and tries once more, so
// the messages published since are delivered.
func (s *source) Fetch(ctx context.Context, n int) ([]handoff.Delivery, error) {
	if n <= 0 {
		return nil, nil
	}
	for ctx.Err() == nil {
		out, err := s.fetchOnce(ctx, n) // waits at most Block
		if isNoGroup(err) && ctx.Err() == nil {
			if err = s.q.createGroup(ctx); err == nil {
				out, err = s.fetchOnce(ctx, n)
			}
		}
		if err != nil && ctx.Err() == nil {
			return out, err
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, nil
}

// fetchOnce moves due retries back onto the stream; claims abandoned
// deliveries when Redelivery/2 has passed since the last claim, busy or
// not; reads new messages at once (XREADGROUP) for the rest of the batch;
// claims when it found none and had not; and with nothing yet, it blocks
// for new messages for at most Block.
func (s *source) fetchOnce(ctx context.Context, n int) ([]handoff.Delivery, error) {
	if err := s.promote(ctx, n); err != nil {
		return nil, err
	}
	var out []handoff.Delivery
	claimed := time.Since(s.swept) >= s.q.redelivery/2
	if claimed {
		s.swept = time.Now()
		got, err := s.claim(ctx, n)
		if err != nil || len(got) == n {
			return got, err
		}
		out = got
	}
	got, err := s.read(ctx, n-len(out), -1)
	out = append(out, got...)
	if err != nil || len(out) > 0 {
		return out, err
	}
	if !claimed {
		s.swept = time.Now()
		got, err := s.claim(ctx, n)
		if err != nil || len(got) > 0 {
			return got, err
		}
	}
	block := s.q.block
	if dl, ok := ctx.Deadline(); ok {
		block = max(min(block, time.Until(dl)), time.Millisecond)
	}
	return s.read(ctx, n, block)
}

// read reads up to n new messages, waiting up to block for the first
// (negative: not at all).
func (s *source) read(ctx context.Context, n int, block time.Duration) ([]handoff.Delivery, error) {
	q := s.q
	res, err := q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: q.group, Consumer: s.name, Streams: []string{q.stream, ">"}, Count: int64(n), Block: block,
	}).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, err
	}
	var out []handoff.Delivery
	for _, st := range res {
		for _, x := range st.Messages {
			payload, _ := x.Values["m"].(string)
			out = append(out, s.delivery(x.ID, payload, 1))
		}
	}
	return out, nil
}

// promote moves due retries (up to max(n, 16)) back onto the stream.
func (s *source) promote(ctx context.Context, n int) error {
	q := s.q
	return promoteScript.Run(ctx, q.rdb, []string{q.stream, q.delayed, q.retried}, max(n, 16)).Err()
}

// delivery is the delivery of the message id, of payload (its field m),
// whose delivery count (XPENDING's) is count.
func (s *source) delivery(id, payload string, count int64) *delivery {
	m, before, of, _ := decode(payload) // a payload that does not decode is delivered with an invalid order
	if of == "" {
		of = id
	}
	return &delivery{s: s, id: id, of: of, count: count, attempt: before + int(count), m: m, payload: payload}
}

// errLeaseLost is the answer to Retry and DeadLetter of a delivery that
// is not the message's current one any more.
var errLeaseLost = errors.New("redisstream: the message was acknowledged, or claimed again after its redelivery timeout")

type delivery struct {
	s  *source
	id string
	// of is the entry ID of the message as first published: id, or the
	// one a Retry's copy names.
	of      string
	count   int64
	attempt int
	m       handoff.Message
	payload string
}

func (d *delivery) Message() handoff.Message { return d.m }
func (d *delivery) Attempt() int             { return d.attempt }

// Ack acknowledges the message and deletes it from the stream, and a
// retried copy's entry from the retried set, in one MULTI; a repeat is
// nil too.
func (d *delivery) Ack(ctx context.Context) error {
	q := d.s.q
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, q.stream, q.group, d.id)
		p.XDel(ctx, q.stream, d.id)
		p.ZRem(ctx, q.retried, d.id)
		return nil
	})
	return err
}

// Retry replaces the message by a copy that counts this delivery, due
// after delay (a zero delay: at the stream's end at once), and keeps the
// message's Sent time in the retried set until the copy is settled.
func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	q := d.s.q
	copyOf := encode(d.m, d.attempt, d.of)
	sent := d.m.Sent
	if sent.IsZero() { // as Oldest dates such a message: by its first entry ID
		sent, _ = idTime(d.of)
	}
	n, err := retryScript.Run(ctx, q.rdb, []string{q.stream, q.delayed, q.retried}, q.group, d.id, d.s.name, d.count,
		max(delay, 0).Milliseconds(), copyOf, sent.UnixMilli()).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return errLeaseLost
	}
	return nil
}

// DeadLetter moves the message, with the reason's text, to the
// dead-letter stream.
func (d *delivery) DeadLetter(ctx context.Context, reason error) error {
	q := d.s.q
	why := ""
	if reason != nil {
		why = reason.Error()
	}
	n, err := deadScript.Run(ctx, q.rdb, []string{q.stream, q.dead, q.retried}, q.group, d.id, d.s.name, d.count, d.payload, why).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return errLeaseLost
	}
	return nil
}
