package store

// Keys of the message queues (core/queue). Every key and the channel of one
// queue carry the hash tag {name}, so each queue script runs in one Cluster
// slot. docs/keys.md describes their contents.

// Queue is the main key of a queue: a list (plain queue), a sorted set
// (delay and priority queues) or a stream (reliable and broadcast queues):
// <prefix>queue:{name}.
func (k Keys) Queue(name string) string { return k.Prefix + "queue:{" + name + "}" }

// QueueMeta is the hash of a queue's kind, sequence counter, counters and
// reclaim cursors: <prefix>queue:{name}:meta.
func (k Keys) QueueMeta(name string) string { return k.Prefix + "queue:{" + name + "}:meta" }

// QueueWaiting is the flag (a string with a short expiry) that a process
// whose waiters found the queue empty sets, so that pushes publish a
// wake-up only while someone waits: <prefix>queue:{name}:waiting.
func (k Keys) QueueWaiting(name string) string { return k.Prefix + "queue:{" + name + "}:waiting" }

// QueueNotify is the channel on which push, nack and requeue scripts wake
// waiting processes: <prefix>queue:{name}:notify.
func (k Keys) QueueNotify(name string) string { return k.Prefix + "queue:{" + name + "}:notify" }

// QueueRetry is the sorted set of a consumer group's nacked messages: stream
// id → retry time (server ms): <prefix>queue:{name}:retry:<group>.
func (k Keys) QueueRetry(name, group string) string {
	return k.Prefix + "queue:{" + name + "}:retry:" + group
}

// QueueConsumers is the sorted set of the consumers (processes) of a queue
// or consumer group: consumer → last seen (server ms):
// <prefix>queue:{name}:consumers, or <prefix>queue:{name}:consumers:<group>.
func (k Keys) QueueConsumers(name, group string) string {
	if group == "" {
		return k.Prefix + "queue:{" + name + "}:consumers"
	}
	return k.Prefix + "queue:{" + name + "}:consumers:" + group
}

// QueueDead is the dead-letter stream of a reliable or broadcast queue:
// <prefix>queue:{name}:dead.
func (k Keys) QueueDead(name string) string { return k.Prefix + "queue:{" + name + "}:dead" }
