// Package natsjs is the hand-off of the tiered flow (package handoff) on
// NATS JetStream: a [Publisher] that the gate's side publishes orders with,
// and a [Source] that the record's side reads them from.
//
// # Wiring
//
//	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
//	...
//	js, err := jetstream.New(nc)
//	pub, err := natsjs.NewPublisher(ctx, js, natsjs.Config{})
//	src, err := natsjs.NewSource(ctx, js, natsjs.Config{})
//
// The publisher goes where the gate's Recorder publishes (see
// handoff.Recorder), the source where the record's consumer reads (see
// handoff.Consumer). Both create the streams and the consumer they use when
// absent, so they can start in either order; give both the same Config.
//
// # Guarantees
//
//   - Publish returns nil once the stream has stored the message (the
//     server's PubAck), with the order ID as its Nats-Msg-Id: a repeat
//     within Config.Duplicates is stored once.
//   - The stream is a work queue read by one durable pull consumer with
//     explicit acks: a message stays until a delivery of it is
//     acknowledged or dead-lettered. One not acknowledged within
//     Config.AckWait (a consumer that stopped) is delivered again, and
//     Delivery.Attempt counts every delivery (the server's NumDelivered).
//   - Retry is a negative acknowledgement with a delay; DeadLetter copies
//     the message to a stream of its own (Config.DeadStream) with the
//     reason in the Stockguard-Reason header, then acknowledges it.
//     JetStream has no dead-letter queue, and a consumer's MaxDeliver
//     would leave a message in the stream undelivered, so the consumer
//     has no MaxDeliver: the Consumer reading the Source decides when a
//     message is dead.
//   - A message whose payload does not decode as a hand-off (written by
//     another program or version) is delivered like any other, with the
//     zero handoff.Message, whose Order is invalid: the handoff.Consumer
//     dead-letters it and reports it (handoff.ErrDeadLettered to
//     ConsumerConfig.Done, a dead-lettered Handoff to the Observer).
//   - Delivery is at least once: a message may come again after its Ack
//     was lost, after a restart, or from a publish the Recorder retried
//     outside the deduplication window. Settle is idempotent, so the
//     record writes an order once whatever the count.
//   - The Publisher is a handoff.OldestReader: Oldest is the Sent time of
//     the stream's first message (one get from the server), the oldest
//     not acknowledged or dead-lettered, retried ones included. A
//     Recorder over the Publisher applies backpressure by the lag of the
//     consumers of every node.
//
// # A server restart
//
// The streams are on file storage by default (Config.Storage): a message
// the server acknowledged survives a restart. The nats.Conn reconnects by
// itself (give it nats.MaxReconnects(-1) so that it never gives up);
// meanwhile Publish fails once its context ends or the client's timeout
// passes (the order stays held at the gate for a retry or the reclaimer),
// Fetch returns the error, and an Ack that fails leaves the message to be
// delivered again after AckWait. Nothing a Source holds is lost: what it
// had not acknowledged is delivered again.
//
// A server that comes back without the streams (memory storage, or a
// store lost or replaced) has lost the messages it held, but not the
// hand-off: a Publish whose stream is not found or does not answer
// creates the stream and publishes once more, with the same Nats-Msg-Id
// (a first publish that was stored after all is not stored twice), and a
// Fetch whose stream or consumer is not found creates them, as
// NewSource does, and fetches once more. A server that answers nothing to
// a pull on a consumer it has not (nats-server 2.9) is asked for the
// consumer while the pulls deliver nothing, at most once a PollWait, so
// an idle Source finds the consumer lost within about a PollWait.
package natsjs
