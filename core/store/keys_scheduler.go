package store

import "strconv"

// The scheduler's keys. Every key of one task carries the hash tag
// {name}, so each scheduler script runs in one Cluster slot (docs/keys.md).

// SchedulerTask is the hash of a distributed task's shared record: kind,
// spec, text, tz, anchor, paused, cursor, last_run, run_count, missed,
// skipped, late, failed, last_error, errored, version, created_at,
// updated_at: <prefix>scheduler:task:{name}.
func (k Keys) SchedulerTask(name string) string { return k.Prefix + "scheduler:task:{" + name + "}" }

// SchedulerRuns is the hash of a task's unfinished claimed firings: field =
// fire time (Unix ms), value = "attempt|owner": <prefix>scheduler:runs:{name}.
func (k Keys) SchedulerRuns(name string) string { return k.Prefix + "scheduler:runs:{" + name + "}" }

// SchedulerLeases is the sorted set of the lease deadlines of a task's
// unfinished firings: member = fire time, score = server time (ms) the
// lease lapses at unless renewed: <prefix>scheduler:leases:{name}.
func (k Keys) SchedulerLeases(name string) string {
	return k.Prefix + "scheduler:leases:{" + name + "}"
}

// SchedulerRun is the claim of one firing, the key that gives each firing
// its identity: a string holding the runner's owner id, expiring with the
// lease (PX lock_ttl, renewed by heartbeats): <prefix>scheduler:run:{name}:<fire ms>.
func (k Keys) SchedulerRun(name string, fire int64) string {
	return k.Prefix + "scheduler:run:{" + name + "}:" + strconv.FormatInt(fire, 10)
}

// SchedulerTrigger is one "run now" of a task (Engine.TriggerAny), the
// manual counterpart of SchedulerRun: empty until a process claims it, then
// the runner's owner id; PX the trigger's window:
// <prefix>scheduler:run:{name}:manual:<id>.
func (k Keys) SchedulerTrigger(name, id string) string {
	return k.Prefix + "scheduler:run:{" + name + "}:manual:" + id
}

// SchedulerControl is the channel on which the scheduler scripts announce
// pause, resume, remove and schedule updates of distributed tasks
// ("<op>\n<name>"), and triggers ("trigger\n<id>\n<name>"): <prefix>scheduler:control.
func (k Keys) SchedulerControl() string { return k.Prefix + "scheduler:control" }
