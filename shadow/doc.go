// Package shadow runs lobbyhost beside a game server's existing ("legacy")
// host logic, compares the two decisions, and moves authority between them
// lobby by lobby.
//
// A [Shadow] wraps a [lobby.Service]. The transport reports to it the same
// evidence it reports to the legacy logic ([Shadow.Join], [Shadow.Heartbeat],
// [Shadow.Disconnect], [Shadow.Leave]) and, after each legacy decision, the
// host the legacy logic chose ([Shadow.ReportLegacyHost]). lobbyhost computes
// and stores its own decisions exactly as it would in production; nothing
// is published to clients unless the [Switch] makes lobbyhost authoritative
// for that lobby. Every disagreement between the two hosts is recorded and
// classified (see [Class]); [Shadow.Report] returns counters, a sample of
// decision-log lines per class and a timeline per lobby, as text or HTML.
//
// # Guarantees and non-guarantees
//
//   - The Switch never touches stored state: lobbyhost commits the same
//     revisions whichever side is authoritative, so switching in either
//     direction rewrites no history. Only the host ReportLegacyHost tells the
//     server to act on, and which events reach the Publisher, change.
//   - Comparisons happen at ReportLegacyHost calls only. A host change that
//     lobbyhost makes on its own (a grace running out) is compared at the
//     legacy logic's next decision for that lobby, so call ReportLegacyHost
//     after every piece of evidence, also when the legacy host did not change.
//   - Classification is a judgement on the evidence the Shadow saw; it does
//     not see inside the legacy logic. A class names the most likely cause;
//     "unexplained" means none of the known causes fits and one side (either)
//     has a defect worth reading.
//   - A timeline shows lobbyhost's transitions as the Shadow sees them: in
//     the results of the commands it sent and at each comparison. A timeout
//     or host change the Service's sweeper committed shows at the next
//     comparison.
//   - Reports and the decision log carry pseudonyms (the Service's
//     [lobby.Service.Pseudonym]), never raw player IDs. The Shadow keeps raw
//     IDs in memory only, to match evidence.
package shadow
