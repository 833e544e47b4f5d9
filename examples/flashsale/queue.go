package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// handoff is one order the gate has held, on its way to the database record.
type handoff struct {
	OrderID  string
	UserID   string
	SKU      string
	Qty      int64
	Deadline time.Time // the gate hold's deadline
	Sent     time.Time // when it was published
}

func (h handoff) values() map[string]any {
	return map[string]any{
		"order": h.OrderID, "user": h.UserID, "sku": h.SKU,
		"qty": h.Qty, "deadline_ms": h.Deadline.UnixMilli(), "sent_ms": h.Sent.UnixMilli(),
	}
}

func parseHandoff(m redis.XMessage) (handoff, bool) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	qty, err1 := strconv.ParseInt(str("qty"), 10, 64)
	dl, err2 := strconv.ParseInt(str("deadline_ms"), 10, 64)
	sent, _ := strconv.ParseInt(str("sent_ms"), 10, 64)
	h := handoff{OrderID: str("order"), UserID: str("user"), SKU: str("sku"), Qty: qty, Deadline: time.UnixMilli(dl), Sent: time.UnixMilli(sent)}
	return h, err1 == nil && err2 == nil && h.OrderID != "" && h.SKU != ""
}

// errPermanent marks a handler failure that no redelivery can fix: the
// message goes to the dead-letter stream at once.
var errPermanent = errors.New("permanent failure")

// queue is the hand-off from the gate to the record: a Redis stream read by
// a consumer group. A message is acknowledged only once the handler has
// recorded the order; a message left unacknowledged for minIdle is claimed
// again (by any consumer), and after maxDeliveries deliveries, or at once on
// errPermanent, it is copied to the dead-letter stream and acknowledged.
type queue struct {
	rdb           redis.UniversalClient
	stream, dead  string
	group         string
	minIdle       time.Duration
	maxDeliveries int64

	// handle records one order; nil means done (acknowledge).
	handle func(context.Context, handoff) error
	// onDead is told of every message moved to the dead-letter stream.
	onDead func(context.Context, handoff, error)

	published, acked, deadLettered, redelivered atomic.Int64
	// sent are the send times of the messages published, in publish
	// order, and handled how many were handled (recorded, ended or
	// dead-lettered, whether or not the reply of their acknowledgement
	// came back). Consumers read in publish order, so the handled-th
	// message is about the oldest not handled yet: its age is the lag.
	mu      sync.Mutex
	sent    []time.Time
	handled int
	// units are the units of each SKU's hand-offs published and not
	// handled yet: held at the gate, on their way to the record; placing
	// those of orders being placed (the gate may hold them before their
	// hand-off is published).
	units, placing map[string]int64
}

// setup creates the stream and its consumer group.
func (q *queue) setup(ctx context.Context) error {
	err := q.rdb.XGroupCreateMkStream(ctx, q.stream, q.group, "0").Err()
	if err != nil && err.Error() != "BUSYGROUP Consumer Group name already exists" {
		return err
	}
	return nil
}

// publish appends h to the stream.
func (q *queue) publish(ctx context.Context, h handoff) error {
	err := q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.stream, Values: h.values()}).Err()
	if err == nil {
		q.mu.Lock()
		q.sent = append(q.sent, h.Sent)
		if q.units == nil {
			q.units = map[string]int64{}
		}
		q.units[h.SKU] += h.Qty
		q.mu.Unlock()
		q.published.Add(1)
	}
	return err
}

// handledOne counts a message handled (h its hand-off, when it parsed).
func (q *queue) handledOne(h handoff, ok bool) {
	q.mu.Lock()
	q.handled++
	if ok {
		q.units[h.SKU] -= h.Qty
	}
	q.mu.Unlock()
}

// onTheWay is the units of sku's hand-offs not handled yet, and of its
// orders being placed.
func (q *queue) onTheWay(sku string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(0, q.units[sku]) + q.placing[sku]
}

// place counts n units of sku being placed (negative n: placed).
func (q *queue) place(sku string, n int64) {
	q.mu.Lock()
	if q.placing == nil {
		q.placing = map[string]int64{}
	}
	q.placing[sku] += n
	q.mu.Unlock()
}

// inFlight is the number of messages published and not yet acknowledged.
func (q *queue) inFlight() int64 {
	return q.published.Load() - q.acked.Load()
}

// lag is about how long the oldest hand-off not handled yet has waited
// (see queue.sent), zero with none.
func (q *queue) lag() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.handled >= len(q.sent) {
		return 0
	}
	return time.Since(q.sent[q.handled])
}

// consume reads new messages as consumer until ctx ends. Read failures (Redis
// down) are retried after a pause. Each read has a deadline of its own, so
// a server that never answers a blocking read (a connection lost without a
// reset) stalls a consumer for a second, not for good.
func (q *queue) consume(ctx context.Context, consumer string) {
	const block = 100 * time.Millisecond
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, block+time.Second)
		res, err := q.rdb.XReadGroup(rctx, &redis.XReadGroupArgs{
			Group: q.group, Consumer: consumer, Streams: []string{q.stream, ">"},
			Count: 8, Block: block,
		}).Result()
		cancel()
		if err != nil {
			if !errors.Is(err, redis.Nil) {
				pause(ctx, 50*time.Millisecond)
			}
			continue
		}
		// The messages of one read are settled at once, so that the
		// record's group commit writes them together, and none waits
		// behind the others of its read.
		var wg sync.WaitGroup
		for _, s := range res {
			for _, m := range s.Messages {
				wg.Go(func() { q.deliver(ctx, m, nil) })
			}
		}
		wg.Wait()
	}
}

// redeliver claims messages left unacknowledged for minIdle, every interval,
// until ctx ends.
func (q *queue) redeliver(ctx context.Context, consumer string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		q.claimIdle(ctx, consumer)
	}
}

// claimIdle runs one pass of XPENDING (with the delivery counts) and XCLAIM.
func (q *queue) claimIdle(ctx context.Context, consumer string) {
	pend, err := q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: q.stream, Group: q.group, Idle: q.minIdle, Start: "-", End: "+", Count: 256,
	}).Result()
	if err != nil || len(pend) == 0 {
		return
	}
	counts := make(map[string]int64, len(pend))
	ids := make([]string, 0, len(pend))
	for _, p := range pend {
		counts[p.ID] = p.RetryCount
		ids = append(ids, p.ID)
	}
	// XCLAIM re-checks the idle time, so a message another consumer is
	// handling right now is not taken from it; it adds one delivery.
	msgs, err := q.rdb.XClaim(ctx, &redis.XClaimArgs{
		Stream: q.stream, Group: q.group, Consumer: consumer, MinIdle: q.minIdle, Messages: ids,
	}).Result()
	if err != nil {
		return
	}
	for _, m := range msgs {
		q.redelivered.Add(1)
		n := counts[m.ID] + 1
		q.deliver(ctx, m, &n)
	}
}

// deliver hands m to the handler and acknowledges it, or dead-letters it.
// deliveries is nil on a first delivery.
func (q *queue) deliver(ctx context.Context, m redis.XMessage, deliveries *int64) {
	h, ok := parseHandoff(m)
	var err error
	if !ok {
		err = errPermanent
	} else {
		err = q.handle(ctx, h)
	}
	switch {
	case err == nil:
		q.handledOne(h, ok)
		q.ack(ctx, m.ID)
	case errors.Is(err, errPermanent) || (deliveries != nil && *deliveries >= q.maxDeliveries):
		if q.deadLetter(ctx, m, err) == nil {
			q.handledOne(h, ok)
			q.deadLettered.Add(1)
			q.ack(ctx, m.ID)
			if ok && q.onDead != nil {
				q.onDead(ctx, h, err)
			}
		}
	}
	// Any other failure leaves the message pending: it is claimed again
	// after minIdle.
}

func (q *queue) ack(ctx context.Context, id string) {
	n, err := q.rdb.XAck(ctx, q.stream, q.group, id).Result()
	if err == nil && n == 1 {
		q.acked.Add(1)
	}
}

// deadLetter copies m, with the reason, to the dead-letter stream.
func (q *queue) deadLetter(ctx context.Context, m redis.XMessage, cause error) error {
	v := make(map[string]any, len(m.Values)+2)
	for k, x := range m.Values {
		v[k] = x
	}
	v["source_id"] = m.ID
	v["error"] = cause.Error()
	return q.rdb.XAdd(ctx, &redis.XAddArgs{Stream: q.dead, Values: v}).Err()
}

// drain waits until every message on the stream has been delivered and
// acknowledged, or ctx ends. The counters are a fast path only: an XACK
// whose reply was lost (Redis went away after applying it) is not counted,
// so it is Redis that says when the queue is empty.
func (q *queue) drain(ctx context.Context) error {
	for {
		if q.inFlight() <= 0 {
			return nil
		}
		if done, err := q.empty(ctx); err == nil && done {
			return nil
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// empty asks Redis whether the group has read the stream's last message
// and has no message pending.
func (q *queue) empty(ctx context.Context) (bool, error) {
	pend, err := q.rdb.XPending(ctx, q.stream, q.group).Result()
	if err != nil || pend.Count > 0 {
		return false, err
	}
	groups, err := q.rdb.XInfoGroups(ctx, q.stream).Result()
	if err != nil {
		return false, err
	}
	last, err := q.rdb.XRevRangeN(ctx, q.stream, "+", "-", 1).Result()
	if err != nil {
		return false, err
	}
	for _, g := range groups {
		if g.Name == q.group {
			return len(last) == 0 || g.LastDeliveredID == last[0].ID, nil
		}
	}
	return false, nil
}

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
