// Package rabbitmq is the hand-off of the tiered flow (package handoff) on
// RabbitMQ: a [Publisher] that the gate's side publishes orders with, and
// a [Source] that the record's side reads them from.
//
// # Wiring
//
//	pub, err := rabbitmq.NewPublisher(ctx, "amqp://guest:guest@127.0.0.1:5672/", rabbitmq.Config{})
//	defer pub.Close()
//	var c *handoff.Consumer // made below: the flow needs the Recorder first
//	rec := handoff.NewRecorder(pub, gate, handoff.RecorderConfig{Lag: func() time.Duration { return c.Lag() }})
//	flow := tiered.New(gate, record, tiered.Config{Recorder: rec})
//
//	src, err := rabbitmq.NewSource(ctx, "amqp://guest:guest@127.0.0.1:5672/", rabbitmq.Config{})
//	defer src.Close()
//	c, err = handoff.NewConsumer(src, flow, handoff.ConsumerConfig{})
//	go c.Run(ctx)
//
// Both declare the queues they use (idempotently), so they can start in
// either order; give both the same Config. The Recorder's Lag is what its
// backpressure reads (see "Backpressure: no broker lag" below): a
// Recorder given none admits every order however far behind the
// consumers are. With several consumers, pass handoff.LagOf over them.
// Example_wiring (example_test.go) is this wiring, compiled with the
// package's tests.
//
// # Guarantees
//
//   - The hand-off is a durable quorum queue (Config.Queue). Publish sends
//     a persistent message whose message-id is the order ID and returns
//     nil only once the broker's publisher confirm acknowledged it and
//     the queue took it: the message is published mandatory, so one no
//     queue takes (the queue was deleted behind the Publisher) is
//     returned by the broker and Publish fails with ErrReturned; the
//     next Publish declares the queue again on a new channel.
//     RabbitMQ does not deduplicate: an order published twice is delivered
//     twice, and Settle, being idempotent, records it once.
//   - A Source consumes with manual acknowledgement only while a Fetch
//     runs (a consumer with a prefetch of the batch, cancelled before
//     Fetch returns), so it never holds a message it was not asked for. A delivery that is
//     neither acknowledged, retried nor dead-lettered within
//     Config.Redelivery is handed back (a reject with requeue), and every
//     delivery of a Source whose connection ends is handed back by the
//     broker. Delivery.Attempt is 1 plus the quorum queue's
//     x-delivery-count.
//   - Retry holds the message for its delay and then hands it back; the
//     quorum queue counts the delivery. DeadLetter publishes the message,
//     with the reason in the x-stockguard-reason header, to
//     Config.DeadQueue (mandatory, with a confirm: a copy no queue takes
//     fails with ErrReturned and the original is handed back), then
//     acknowledges it. The DeadQueue is also the queue's dead-letter
//     destination for anything the broker drops itself (a delivery limit
//     set by policy). The queues are declared with an x-delivery-limit
//     no message reaches (2147483647), so that RabbitMQ 4's default
//     limit of 20 deliveries does not dead-letter an order the Consumer
//     still retries through a record outage; a policy's delivery-limit,
//     if lower, applies.
//   - A message whose payload does not decode as a hand-off (written by
//     another program or version) is delivered like any other, with the
//     zero handoff.Message, whose Order is invalid: the handoff.Consumer
//     dead-letters it and reports it (handoff.ErrDeadLettered to
//     ConsumerConfig.Done, a dead-lettered Handoff to the Observer).
//   - An Ack is not confirmed by AMQP 0-9-1: one lost with its connection
//     means the message is delivered again, and settled again, which
//     changes nothing.
//
// # Backpressure: no broker lag
//
// The Publisher is not a handoff.OldestReader: it cannot tell the
// hand-off's lag as the broker sees it. A quorum queue tells how many
// messages it holds (Publisher.Ready) but not how old the first one is,
// and the only way to read that message, a basic.get handed back with a
// requeue, would count a delivery against it (x-delivery-count, towards
// a delivery limit) and let another consumer take it out of turn. So a
// Recorder over the Publisher applies backpressure by
// handoff.RecorderConfig.Lag alone, this process's consumers' measure
// (handoff.LagOf over them; stockguard.Config.Handoff wires the Shop's,
// and it counts the messages a Source holds for a Retry's delay):
// it sees neither the consumers of other nodes nor the messages waiting
// for a consumer that none of them has fetched yet. Where every node
// publishes and consumes, each node's own consumers slow its own
// admissions; a node that publishes without consuming applies none.
//
// # A broker restart
//
// A Publisher and a Source open their connection on first use and a new
// one when the last one closed: the call that meets the closed channel
// fails (a Publish retries on a new connection until its context ends or
// Config.PublishTimeout passes), and the next call reconnects. Nothing
// is lost: a message the broker confirmed is on the quorum queue's
// majority, and whatever was delivered and not acknowledged is handed
// back when the connection ends. A delivery taken before the restart
// cannot be acknowledged after it (its delivery tag belonged to the old
// channel): its Ack fails and the message comes again.
package rabbitmq
