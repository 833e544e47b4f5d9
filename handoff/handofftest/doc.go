// Package handofftest is the conformance suite of the handoff adapter
// contract, shaped like testing/fstest: every adapter the project ships
// runs it, and so can an adapter for a shop's own broker.
//
//	func TestConformance(t *testing.T) {
//		handofftest.Run(t, handofftest.Harness{
//			Redelivery: 300 * time.Millisecond, // the adapter's timeout, small in tests
//			New: func(t *testing.T) handofftest.Queue {
//				q := mybroker.NewQueue(t.Name(), 300*time.Millisecond) // fresh and empty
//				t.Cleanup(q.Close)
//				return handofftest.Queue{Publisher: q, NewSource: q.Consumer, DeadLetters: q.ReadDeadLetters}
//			},
//		})
//	}
//
// New is called once per subtest and must return an empty queue of its
// own. The suite checks, each on a fresh queue:
//
//   - a published message is delivered on attempt 1 with every field as
//     published (times to the millisecond);
//   - Ack removes it for good, from every consumer, past the timeout;
//   - Retry(delay) delivers it again no sooner than delay, Attempt one
//     more (a zero delay at once);
//   - a delivery left alone is delivered again after the adapter's
//     timeout, not before, Attempt one more, to any consumer;
//   - DeadLetter removes it and it is in the dead letters with the
//     reason's text;
//   - Fetch on an empty queue returns no delivery and no error when its
//     context ends, promptly, and at once with a context already done;
//   - messages from concurrent publishers are delivered once each, in
//     batches of at most the size asked, across consumers sharing the
//     queue;
//   - a Publisher that is a handoff.OldestReader tells the Sent time of
//     the oldest message not acknowledged, delivered or not, retried with
//     no delay or not (a Retry(0) puts it back in the queue, behind newer
//     messages on some brokers, and it is still the oldest), and false on
//     an empty queue. The check needs that capability, and is opted out
//     of by not having it: it is skipped for a Publisher that is not a
//     handoff.OldestReader (as rabbitmq's, whose broker cannot peek a
//     queue's head; its Recorder falls back to RecorderConfig.Lag);
//   - end to end, through a handoff.Consumer settling into a tiered flow
//     over memstock tiers: concurrent buyers, several consumers, an order
//     handed off twice, a consumer that stops between Settle and Ack:
//     every order is recorded exactly once (both tiers hold exactly the
//     units ordered), every message is acknowledged, none dead-lettered,
//     and the queue is empty after (a delivery that outlived the timeout
//     on a starved machine may be acknowledged twice, by both consumers).
//
// The waits a promise bounds are checked with the margins stated in the
// code (an early redelivery by 20ms of broker clock rounding; a late one by
// 10s of a busy machine), so the suite passes on a loaded machine and
// takes a few seconds per subtest at a Redelivery of a few hundred
// milliseconds.
//
// [Memory] is an in-process queue that keeps the contract: a stand-in for
// a broker in a shop's own tests.
package handofftest
