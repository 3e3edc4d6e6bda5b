// Package politeness schedules fetches by crawl host group (CHG): one or
// more hosts that must never be fetched from concurrently and that must wait
// between fetches. It follows the crawl host groups and host reservation of
// the National Library of Norway's crawler Veidemann
// (https://github.com/nlnwa/veidemann) and Heritrix's frontier queue budgets
// (https://github.com/internetarchive/heritrix3).
//
// It is a pure in-process domain package: a [Scheduler] keeps, per group, a
// queue of items and hands out at most one item per group at a time. Each
// group is in exactly one state:
//
//   - ready: eligible now, in a FIFO of ready groups (Veidemann's chg_ready);
//   - waiting: in a min-heap keyed by the time it becomes eligible
//     (chg_wait), which is the later of its politeness time and the earliest
//     time of its next item;
//   - busy: one item is leased, in a min-heap keyed by the busy timeout
//     (chg_busy); a group whose timeout passes returns to ready even if the
//     lease is never released, and a late [Scheduler.Release] is ignored;
//   - inactive: eligible but waiting its turn in a FIFO of inactive groups,
//     because its session balance is spent or hold-queues is on (Heritrix);
//     inactive groups are activated only when no group is ready;
//   - retired: its lifetime spend reached its total budget; it keeps its
//     items and accepts new ones but is not scheduled until its budget is
//     raised;
//   - idle: no items and not busy (its politeness time is remembered).
//
// Add, Next and Release cost O(log n) in the number of groups; a group's
// backlog size never delays another group (no head-of-line blocking).
//
// Within one group, items whose time has come are handed out cheapest first
// (by the cost the group's [CostPolicy] assigned when they were added) and in
// insertion order among equal costs, as Heritrix schedules costlier URIs
// behind cheaper ones within a queue. Items with a future NotBefore wait in a
// per-group heap until that time.
//
// The delay after a fetch is computed by [DelayPolicy.Decide]; its
// [Decision] says which term set it (see [Why]). Groups are computed from
// hosts by a [Grouper] (host by default, configured aliases, optionally the
// resolved IP address). Budgets follow Heritrix's balance-replenish-amount and
// queue-total-budget (see [Budget]).
package politeness
