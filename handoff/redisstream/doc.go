// Package redisstream is the hand-off of the tiered flow on a Redis stream
// (package handoff): a Queue publishes messages with XADD, and its Sources
// read them in one consumer group.
//
//	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "orders"})
//	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{})        // tiered.Config.Recorder
//	c, err := handoff.NewConsumer(q.Source("node1-0"), flow, handoff.ConsumerConfig{})
//	go c.Run(ctx)
//
// It keeps the handoff adapter contract (it passes package handofftest,
// on miniredis, a Redis server and a Redis Cluster):
//
//   - Fetch moves due retries back onto the stream (a script call), then
//     reads new messages (one XREADGROUP: with the script, the cost of a
//     busy queue), so a retry whose delay has passed when a Fetch begins
//     is read by it or a later one, busy queue or not; at least every
//     Redelivery/2, and whenever it reads nothing new, it also claims
//     deliveries left unacknowledged for Config.Redelivery (XAUTOCLAIM),
//     before the new messages, with their delivery count one more
//     (Delivery.Attempt).
//   - A claim is one script call: an XAUTOCLAIM of up to the batch's size
//     n, which on a Redis server looks at no more than 10*n of the
//     group's pending deliveries (or stops once it took n), with the
//     delivery count of each delivery it took, so that the deliveries a
//     claim took are in its reply (a Fetch whose context ends once the
//     claim answered returns them). The claims of a Queue make
//     passes over the pending deliveries: each goes on from where the
//     Queue's last one stopped; the first of a pass begins at the first
//     pending delivery and also reads the greatest pending ID (XPENDING,
//     in the same call), and the pass ends once a claim reached
//     the last pending delivery or went past that ID. So every delivery
//     pending when a pass begins is looked at by it, and a delivery left
//     by a stopped consumer is claimed even behind many that live
//     consumers hold and renew, busy queue or not: once due, within
//     about P/(10*n)+2 claims of a Queue if it was pending when the pass
//     under way began, P the deliveries pending then, and within about
//     (P+A)/(10*n)+2 if it became pending later, A the deliveries pending
//     ahead of it; claims that take n not counted. One claim of a Queue
//     runs at a time: a Source whose claim would overlap another of the
//     same Queue claims nothing that time (it would look at the same
//     deliveries). Queues of other nodes keep their own place; claims of
//     two Queues that overlap take nothing twice: XAUTOCLAIM takes only
//     a delivery that is due, and one it took is not due again for
//     Redelivery.
//   - Ack acknowledges the message and deletes it from the stream (XACK
//     and XDEL in one MULTI): the stream belongs to its one group, so
//     [Queue.Len] counts what is left to settle.
//   - Retry replaces the message by a copy that counts the deliveries so
//     far, due after the delay in a sorted set (the server's clock), and
//     moved back onto the stream by a Fetch once due; in the same script
//     it keeps the message's Sent time in a retried set, under the copy's
//     entry ID (its payload while it waits out the delay), until the copy
//     is acknowledged, dead-lettered (both remove it atomically with the
//     message) or retried again, so [Queue.Oldest], the earlier of the
//     stream's head and the retried set's first (one script), counts a
//     retried message waiting behind newer ones. Oldest first drops the
//     members whose copy is gone (settled by an Ack that does not keep
//     the set, as a previous version's during a rolling upgrade), so the
//     set cannot keep the lag of a settled message. DeadLetter copies
//     it with the reason to a dead-letter stream. Both act only while the
//     delivery is the message's current one (same consumer, same delivery
//     count): a delivery that timed out and was claimed again cannot
//     hand the message back twice.
//   - A payload that does not decode is delivered as a Message with an
//     empty order, which the Consumer dead-letters as invalid.
//
// Redis streams have no deduplication: an order handed off twice is two
// messages, and Settle records it once. Keys: the stream, Stream+":delayed",
// Stream+":dead" and Stream+":retried", in one hash tag.
package redisstream
