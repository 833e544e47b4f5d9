package handoff

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stockguard/stockguard/internal/callctx"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Settler records an order the gate holds: *tiered.Manager and
// *stockguard.Shop are Settlers, and HoldReaders too. A Settler of your
// own (a wrapper) that is no HoldReader has its messages dead-lettered by
// their Deadline alone: implement HoldReader (call the flow's HeldUntil)
// so that an order whose hold was extended after it was published is not
// given up on while the gate still holds it.
type Settler interface {
	Settle(ctx context.Context, o stock.Order) error
}

// HoldReader is what a Settler may also implement: it tells until when
// the gate holds an order. *tiered.Manager and *stockguard.Shop implement
// it. The Consumer asks it (one read) only before it would dead-letter a
// message, once the message's Deadline has passed: a hold extended after
// the message was published (stock.HoldExtender on a pending order) ends
// later than the Deadline, and the gate, not the message, decides when
// it ends: past its Deadline a message is dead-lettered only once the
// gate answers that it no longer holds the order. A gate that cannot
// answer (HeldUntil's error: an outage) means a Retry, until the longest
// a hold can last has passed: stock.MaxHoldTTL after the message's Sent
// (or its Deadline, if Sent is unset).
type HoldReader interface {
	// HeldUntil returns the deadline of the order's hold at the gate, or
	// the zero time when the gate does not hold it (unknown, or the hold
	// ended); an error when the gate cannot tell.
	HeldUntil(ctx context.Context, orderID string) (time.Time, error)
}

// ErrDeadLettered matches the error Config.Done receives for a message
// the Consumer moved to the dead letters; the error wraps the reason too.
var ErrDeadLettered = errors.New("handoff: dead-lettered")

// ConsumerConfig configures a Consumer. The zero value means the defaults.
type ConsumerConfig struct {
	// Batch is how many messages one Fetch takes; they are settled
	// concurrently, so that the record's group commit writes them in one
	// transaction. Zero means 64, sqlstock's default MaxGroup; keep it at
	// most the record's MaxGroup.
	Batch int
	// MaxAttempts is the delivery from which a message whose Settle
	// still fails for an infrastructure reason is dead-lettered instead
	// of retried, once its Deadline has passed (a message without one,
	// which a Recorder never publishes, is past it) and the gate answers
	// that it no longer holds the order (the Settler's HoldReader, asked
	// then). While the gate holds the order, or cannot answer (until
	// stock.MaxHoldTTL after the message's Sent, or its Deadline if Sent
	// is unset: the longest a hold can last), the Consumer retries it
	// however many deliveries that takes. A Settler that is no
	// HoldReader leaves the Deadline alone to decide. Zero means 10.
	MaxAttempts int
	// Backoff is the delay of the first Retry after an infrastructure
	// failure; each later attempt doubles it, up to MaxBackoff. Zero
	// means 50ms and 5s.
	Backoff, MaxBackoff time.Duration
	// Poll is the longest one Fetch waits for a message: an idle consumer
	// reports a Lag of zero after it (but for the messages it handed back
	// for a Retry, until they are back in the queue), and one whose Fetch
	// has failed for Poll reports zero. Zero means 500ms.
	Poll time.Duration
	// Done, if set, is called once a delivery's message ended: err is
	// nil (the record has the order), Settle's business error (the order
	// ended holding nothing at either tier, e.g. stock.ErrHoldExpired for
	// one that expired in the queue), or an error matching
	// ErrDeadLettered. The record decides an order's end, not the
	// broker: Done is called once Settle answered, whether or not the Ack
	// that follows succeeds (an Ack whose reply was lost may have removed
	// the message, and then nothing would report the order), and after a
	// DeadLetter that returned nil. A message whose Ack failed may be
	// delivered again and reported again, with the same outcome; so is
	// one whose delivery outlived the adapter's redelivery timeout (Settle
	// took longer). Count by order ID.
	Done func(ctx context.Context, m Message, err error)
	// Observer receives a Handoff report per delivery that ended.
	Observer observe.Observer
	// Clock tells the time for lag and expiry. Nil means
	// stock.SystemClock.
	Clock stock.Clock
}

// Consumer settles what a Source delivers into a tiered flow: it fetches
// a batch, calls Settle for each message concurrently, and ends each
// delivery by Settle's answer:
//
//   - nil, or a business error (the order ended holding nothing: its hold
//     expired in the queue, the record refused it): Ack. Settle is
//     idempotent, so a redelivery of an acknowledged message is harmless.
//   - an error matching stock.ErrInvalid (a message that can never
//     settle: a payload the adapter could not decode): DeadLetter at once.
//   - any other error (the record or the gate cannot answer): Retry after
//     a backoff that doubles per attempt (up to MaxBackoff) for as long as
//     the gate holds the order, so an outage shorter than the hold loses
//     no order: until the message's Deadline, and past it while the
//     Settler's HoldReader (asked once the Deadline has passed and the
//     attempt is MaxAttempts or later) does not answer that the gate no
//     longer holds the order: while it holds it (its hold was extended),
//     each Retry is due before the gate's deadline; while it cannot
//     answer (an outage), Retry after the backoff until stock.MaxHoldTTL
//     after the message's Sent (or its Deadline), the longest a hold can
//     last. Past its Deadline (a message without one is past it),
//     DeadLetter once the gate answers that it no longer holds the order
//     or that bound has passed; a Settler that is no HoldReader: once the
//     Deadline has passed. The gate hold of a dead-lettered order is
//     returned by the gate's reclaimer at its deadline (or revert it in
//     Done).
//
// A message delivered after its Deadline is settled all the same: Settle
// returns its hold through the refusal path if the hold ended. It is
// counted as expired (observe.Handoff.Expired) when the gate's hold had
// ended: Settle answered stock.ErrHoldExpired, or the message was
// dead-lettered past its Deadline because the gate answered that it no
// longer holds the order (or the bound above passed). A Consumer is safe
// for concurrent use; run one per Source.
type Consumer struct {
	src  Source
	flow Settler
	cfg  ConsumerConfig

	mu      sync.Mutex
	oldest  time.Time // Sent of the oldest message of the batch in hand, or of the last batch
	ended   time.Time // when the last batch ended; zero while one is in hand
	idle    bool      // the last Fetch found nothing, failed for Poll, or Run returned
	fetched time.Time // when Run's last Fetch answered without an error
	retried retried   // messages handed back for a Retry, not back in the queue yet
}

// NewConsumer returns a Consumer that settles src's messages into flow.
func NewConsumer(src Source, flow Settler, cfg ConsumerConfig) (*Consumer, error) {
	if src == nil || flow == nil {
		return nil, &stock.InvalidError{Field: "handoff.NewConsumer", Reason: "needs a Source and a Settler"}
	}
	if cfg.Batch < 0 || cfg.MaxAttempts < 0 || cfg.Backoff < 0 || cfg.MaxBackoff < 0 || cfg.Poll < 0 {
		return nil, &stock.InvalidError{Field: "handoff.ConsumerConfig", Reason: "negative setting"}
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = stock.SystemClock
	}
	return &Consumer{src: src, flow: flow, cfg: cfg, idle: true}, nil
}

// Run settles batches until ctx ends, then returns nil once the batch in
// hand is settled (its Settles and acknowledgements run to the end, on a
// context without ctx's cancellation, so a stopping consumer leaves no
// order half-way that it could have finished). A failing Fetch is retried
// after Backoff; the deliveries it returned with its error, if any, are
// settled first (they are in this consumer's hands: left alone, they
// would wait out the adapter's redelivery timeout).
//
// Once Run has returned, the Consumer's Lag is zero: a consumer that no
// longer fetches does not hold the hand-off's lag (and the Recorder's
// backpressure) at the last batch's.
func (c *Consumer) Run(ctx context.Context) error {
	defer c.stopped()
	c.mu.Lock()
	c.fetched = c.cfg.Clock.Now()
	c.mu.Unlock()
	for ctx.Err() == nil {
		asked := time.Now() // a Retry's delay is the broker's, waited out in real time
		fctx, cancel := context.WithTimeout(ctx, c.cfg.Poll)
		ds, err := c.src.Fetch(fctx, c.cfg.Batch)
		cancel()
		if err == nil {
			c.mu.Lock()
			c.fetched = c.cfg.Clock.Now()
			c.mu.Unlock()
		}
		if err == nil || len(ds) > 0 {
			c.settleBatch(context.WithoutCancel(ctx), ds, asked)
		}
		if err != nil {
			c.fetchFailed()
			callctx.Sleep(ctx, c.cfg.Backoff)
		}
	}
	return nil
}

// fetchFailed drops the lag the last batch ended with once Run's Fetch
// has failed for Poll since the batch ended (or since the last Fetch
// that answered): the consumer no longer tells how far behind the
// queue is, and a lag it cannot refresh would refuse orders for ever.
func (c *Consumer) fetchFailed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended.IsZero() { // a batch in hand: its own lag still grows
		return
	}
	since := c.fetched
	if c.ended.After(since) {
		since = c.ended
	}
	if c.cfg.Clock.Now().Sub(since) >= c.cfg.Poll {
		c.idle = true
		c.retried.clear()
	}
}

// stopped drops the Consumer's lag when Run returns.
func (c *Consumer) stopped() {
	c.mu.Lock()
	c.idle = true
	c.retried.clear()
	c.mu.Unlock()
}

// Settle settles one batch of deliveries concurrently and returns when
// each has ended (acknowledged, retried or dead-lettered, or left to the
// adapter's redelivery when that failed too). Run calls it; call it
// yourself to drive a Source your own way, with the deliveries of each
// Fetch, none included (an empty Fetch tells the Consumer's Lag that the
// queue had nothing ready).
func (c *Consumer) Settle(ctx context.Context, ds []Delivery) {
	c.settleBatch(ctx, ds, time.Now())
}

// settleBatch is Settle of the deliveries of a Fetch begun at asked (the
// system's time).
func (c *Consumer) settleBatch(ctx context.Context, ds []Delivery, asked time.Time) {
	c.begin(ds, asked)
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() { c.settle(ctx, d) })
	}
	wg.Wait()
	c.end()
}

func (c *Consumer) settle(ctx context.Context, d Delivery) {
	m := d.Message()
	err := c.flow.Settle(ctx, m.Order)
	h := observe.Handoff{Expired: errors.Is(err, stock.ErrHoldExpired), Attempt: d.Attempt(), Outcome: observe.Classify(err)}
	switch {
	case errors.Is(err, stock.ErrInvalid):
		c.deadLetter(ctx, d, h, err)
	case err == nil || stock.IsBusiness(err):
		_ = d.Ack(ctx) // a failed Ack: delivered again, settled again
		c.finish(ctx, m, h, err)
	case d.Attempt() < c.cfg.MaxAttempts || !c.cfg.Clock.Now().After(m.Deadline):
		c.retry(ctx, d, c.backoff(d.Attempt()))
	default:
		c.pastDeadline(ctx, d, h, err)
	}
}

// pastDeadline ends a delivery whose Settle failed for an infrastructure
// reason, at MaxAttempts or later and past its Deadline: the gate
// decides. An order the gate still holds is retried before its hold
// ends; one the gate answers it no longer holds is dead-lettered (its
// hold ended: Expired). A gate that cannot answer (the Settler's
// HoldReader fails, as in a gate outage) means a Retry, until the
// longest a hold can last has passed since the message was Sent (or
// its Deadline): stock.MaxHoldTTL; past that it is dead-lettered
// (Expired). A Settler that is no HoldReader: dead-lettered by the
// Deadline alone.
func (c *Consumer) pastDeadline(ctx context.Context, d Delivery, h observe.Handoff, err error) {
	m := d.Message()
	hr, ok := c.flow.(HoldReader)
	if !ok {
		c.deadLetter(ctx, d, h, err)
		return
	}
	now := c.cfg.Clock.Now()
	until, rerr := hr.HeldUntil(ctx, m.Order.ID)
	switch {
	case rerr == nil && until.After(now):
		c.retry(ctx, d, min(c.backoff(d.Attempt()), until.Sub(now)))
	case rerr != nil && now.Before(holdBound(m)):
		c.retry(ctx, d, c.backoff(d.Attempt()))
	default:
		h.Expired = true
		c.deadLetter(ctx, d, h, err)
	}
}

// holdBound is the latest a hold of m's order can end: its Sent (or, if
// unset, its Deadline) plus stock.MaxHoldTTL; the zero time for a
// message with neither.
func holdBound(m Message) time.Time {
	from := m.Sent
	if from.IsZero() {
		from = m.Deadline
	}
	if from.IsZero() {
		return time.Time{}
	}
	return from.Add(stock.MaxHoldTTL)
}

// retry hands d back for a Retry after delay; left alone on failure (the
// adapter's timeout redelivers it).
func (c *Consumer) retry(ctx context.Context, d Delivery, delay time.Duration) {
	_ = d.Retry(ctx, delay)
	c.mu.Lock()
	c.retried.add(d.Message(), time.Now().Add(delay))
	c.mu.Unlock()
}

func (c *Consumer) deadLetter(ctx context.Context, d Delivery, h observe.Handoff, reason error) {
	if d.DeadLetter(ctx, reason) != nil {
		return // delivered again after the adapter's timeout
	}
	h.DeadLettered = true
	h.Outcome = observe.Failed
	c.finish(ctx, d.Message(), h, fmt.Errorf("%w after %d deliveries: %w", ErrDeadLettered, d.Attempt(), reason))
}

func (c *Consumer) finish(ctx context.Context, m Message, h observe.Handoff, err error) {
	if !m.Sent.IsZero() {
		h.Lag = max(c.cfg.Clock.Now().Sub(m.Sent), 0)
	}
	c.cfg.Observer.SendHandoff(ctx, h)
	if c.cfg.Done != nil {
		c.cfg.Done(ctx, m, err)
	}
}

// backoff is the Retry delay after the given attempt failed.
func (c *Consumer) backoff(attempt int) time.Duration {
	d := c.cfg.Backoff
	for i := 1; i < attempt && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, c.cfg.MaxBackoff)
}

// Lag is how far behind the queue this consumer is: the age of the oldest
// message of the batch in hand, or the lag the last batch ended with,
// until a Fetch finds the queue empty (then zero); and, all the while,
// the age of the oldest message it handed back for a Retry that is not
// back in the queue yet. A message waiting out a Retry's delay (in the
// broker's delayed set, or held by the Source) is not ready: a Fetch that
// finds nothing else finds the queue empty of ready messages only, so
// the Consumer counts it until it is delivered again to this consumer
// (then it is in the batch in hand) or until the first Fetch begun once
// its delay has passed (by then it is back in the queue, and the
// consumer that takes it counts it). Under Run, the lag is dropped too
// once Fetch has failed for Poll (the consumer no longer sees the queue)
// and once Run has returned: a consumer that stopped fetching does not
// hold the lag for ever. A Recorder's RecorderConfig.Lag reads it to
// slow admissions. A nil Consumer's Lag is zero.
func (c *Consumer) Lag() time.Duration {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	var lag time.Duration
	if s := c.retried.oldest; !s.IsZero() {
		lag = max(now.Sub(s), 0)
	}
	switch {
	case c.idle || c.oldest.IsZero():
	case c.ended.IsZero():
		lag = max(lag, now.Sub(c.oldest))
	default:
		lag = max(lag, c.ended.Sub(c.oldest))
	}
	return lag
}

// begin starts the batch ds of a Fetch begun at asked (the system's
// time): the messages it handed back for a Retry that ds delivers again,
// or whose delay had passed by asked, are no longer this consumer's to
// count.
func (c *Consumer) begin(ds []Delivery, asked time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retried.drop(ds, asked)
	c.idle = len(ds) == 0
	c.oldest, c.ended = time.Time{}, time.Time{}
	for _, d := range ds {
		if s := d.Message().Sent; !s.IsZero() && (c.oldest.IsZero() || s.Before(c.oldest)) {
			c.oldest = s
		}
	}
}

func (c *Consumer) end() {
	c.mu.Lock()
	c.ended = c.cfg.Clock.Now()
	c.mu.Unlock()
}

// LagOf returns a func reporting the largest Lag of cs: the
// RecorderConfig.Lag of a node that runs several consumers.
func LagOf(cs ...*Consumer) func() time.Duration {
	return func() time.Duration {
		var lag time.Duration
		for _, c := range cs {
			lag = max(lag, c.Lag())
		}
		return lag
	}
}
