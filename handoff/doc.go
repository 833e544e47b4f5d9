// Package handoff carries orders from the gate to the record through a
// message broker: the asynchronous hand-off of the tiered flow.
//
// An adapter for a broker implements [Publisher] and [Source]. The
// interfaces are small so that a shop's own broker can be plugged in the
// same way as the adapters the project ships.
package handoff
