// Package handoff carries orders from the gate to the record through a
// message broker: the asynchronous hand-off of the tiered flow.
//
// # The flow
//
// The gate answers the buyer at once and the record takes the order at the
// pace the database can:
//
//	buyer -> tiered.Manager.Place -> gate hold -> Recorder.Record -> Publisher (broker)
//	broker -> Source.Fetch -> Consumer -> tiered.Manager.Settle -> record -> Delivery.Ack
//
// A [Recorder] is the flow's tiered.Recorder: it publishes each order the
// gate holds as a [Message] with the gate hold's Deadline (the hold time
// is the gate's own, read from it, never a second setting) and the time
// it was Sent. An order whose hold time the gate cannot tell (read twice)
// is not published: Place answers it half-way (an unknown outcome) for
// its retry to hand off (with the gate's deadline of the hold, which
// began with the first attempt: [Recorder.RecordUntil]), so no order
// told yes lacks a Deadline to be retried by. A [Consumer] fetches
// batches (sized for the record's group commit), settles each message
// concurrently, and ends each delivery by Settle's answer: Ack after nil
// or a business error (the order ended holding nothing), Retry with a
// doubling backoff after an infrastructure error for as long as the gate
// still holds the order (until the message's Deadline, and past it while
// the gate says it holds the order, its hold extended since, or cannot
// answer, up to stock.MaxHoldTTL after the message was Sent: the
// Settler's [HoldReader], asked only then), DeadLetter once an
// infrastructure error outlives ConsumerConfig.MaxAttempts and the gate
// answers that it no longer holds the order (or that bound passed), or at
// once for a message that can never settle (stock.ErrInvalid). A message
// delivered after its Deadline is settled all the same: Settle returns a
// hold that ended through the refusal path. It is counted as expired when
// the gate's hold had ended (Settle answered stock.ErrHoldExpired, or it
// was dead-lettered because the gate no longer holds the order). Each
// delivery that ended is reported to observe.Observer.Handoff (lag from
// publish to record, expired or not, attempt, outcome).
//
//	q, _ := redisstream.New(ctx, rdb, redisstream.Config{Stream: "orders"})
//	var c *handoff.Consumer // made below: the flow needs the Recorder first
//	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Lag: func() time.Duration { return c.Lag() }})
//	flow := tiered.New(gate, record, tiered.Config{Recorder: rec})
//	c, _ = handoff.NewConsumer(q.Source("node1-0"), flow, handoff.ConsumerConfig{})
//	go c.Run(ctx)
//
// # Backpressure
//
// One rule: while the hand-off lags more than a bound, new orders are
// refused before the gate holds anything. The Recorder is a
// tiered.Admitter: its Admit returns [ErrBacklog] (matching
// stock.ErrContention: nothing applied, retry later) while the lag exceeds
// RecorderConfig.MaxLag, by default half the order's hold time, so an
// order that is admitted reaches the record with at least half its hold
// left to be paid in. tiered.Manager.Place returns it wrapped in
// tiered.ErrNotAdmitted, which package degrade does not count against its
// breaker.
//
// The lag is the broker's where the Publisher tells it: an [OldestReader]
// answers the Sent time of the oldest message not acknowledged, which
// counts the consumers of every node; the Recorder asks at most once per
// RecorderConfig.LagCache (100ms), so admissions do not cost a round trip
// each. RecorderConfig.Lag, this process's measure, counts too (the larger
// of the two is the lag; it alone without an OldestReader and while Oldest
// fails), since an adapter may leave out of Oldest the messages it delays
// for a retry: Consumer.Lag (or LagOf over this node's consumers),
// the age of the oldest message of the batch in hand, held after the
// batch until a Fetch finds the queue empty, and the age of each message
// the consumer handed back for a Retry, until it is delivered to the
// consumer again or a Fetch begun once its delay passed (it is back in
// the queue, for whichever consumer takes it); all dropped once a Fetch
// of Run has failed for ConsumerConfig.Poll, or Run has returned (a
// consumer that stopped fetching no longer counts). Either way, refusing
// admissions drains the queue and reopens them.
//
// # Writing an adapter
//
// An adapter for a broker implements [Publisher] and [Source] (whose
// Fetch returns [Delivery] values); package handoff/redisstream is one.
// Its promises:
//
//   - Publish returns nil only once the broker has the message; a repeat
//     of an order is harmless (Settle is idempotent), and the order ID is
//     the broker's deduplication ID where it has one.
//   - Every field of Message comes back as published, times to the
//     millisecond. A payload that cannot be decoded is delivered with an
//     invalid (e.g. empty) Order, so the Consumer dead-letters it.
//   - Attempt counts deliveries: 1, then one more after each Retry or
//     redelivery.
//   - Ack removes the message for good. Retry(delay) hands it back, not
//     delivered again before delay. A delivery neither acknowledged,
//     retried nor dead-lettered is delivered again (to any consumer of the
//     queue) after the adapter's timeout, and not before. DeadLetter moves
//     it, with the reason's text, to a dead-letter destination.
//   - Fetch returns at most max deliveries, waits while there are none,
//     and returns with no error (and no delivery) when its context ends.
//   - Publisher and Delivery are safe for concurrent use; each Source is
//     one consumer, its Fetch called by one goroutine at a time.
//   - Optionally, the Publisher is an [OldestReader]: Oldest tells the
//     Sent time of the oldest message not acknowledged or dead-lettered
//     (one waiting out a Retry's delay may be left out), false when there
//     is none, in one cheap call (the head of a stream; the first message
//     of a queue or stream, peeked without taking it). Implement it: it is
//     the lag the Recorder's backpressure reads, across every node. (The
//     redisstream and natsjs adapters do; rabbitmq cannot, as its package
//     doc says, and falls back to RecorderConfig.Lag.)
//
// # Testing an adapter
//
// Package handoff/handofftest checks these promises, and the whole flow
// through a Consumer on a tiered flow (concurrent buyers, several
// consumers, one killed between Settle and Ack), on fresh queues of the
// adapter:
//
//	func TestConformance(t *testing.T) {
//		handofftest.Run(t, handofftest.Harness{Redelivery: 300 * time.Millisecond, New: newQueue})
//	}
//
// handofftest.Memory is an in-process queue that keeps the contract, for
// a shop's own tests.
package handoff
