"""The shared network's data structures (SCEMon §4): one event-centric composable queue
per event class (:mod:`.ecq`: the ECQ with its composition links, CLT, and reverse links,
R-CLT), its shared instance queue (:mod:`.siq`), the partial matching blocks of stored
instances (:mod:`.pmb`) and the state of each registered query or shared sub-pattern
(:mod:`.qstate`). The network (:mod:`ecq.network`) makes and reads them."""
