#!/usr/bin/env bash
# Every proof can fail (docs/STATUS.md, column "caught by").
#
# For each rule of the design that a row of docs/STATUS.md guards (safety or liveness), this
# runs the test the row cites twice: once with the rule removed, by switching on its broken
# model (WASMKEEP_BROKEN_MODELS, src/base/broken_models.h; the simulator's --mutant), where
# the test must FAIL; and once as built, where it must PASS. A rule is "caught" only when
# both hold. It prints one table line per rule and exits non-zero if any rule is not caught.
#
#   scripts/check-proofs.sh [BUILD_DIR]          BUILD_DIR: default build/ci (needs
#                                                 WK_BROKEN_MODELS=ON, every preset but release)
#
# Environment:
#   CHECK_PROOFS_ONLY=REGEX   only the rows whose rule, switch or test match REGEX
#   CHECK_PROOFS_CLUSTER=0    skip the rows whose proof is a real-process cluster test
#   CHECK_PROOFS_BACKEND=file the cluster tests' backend (file, or s3 with scripts/rgw.sh's env)
#   CHECK_PROOFS_SEEDS=200    seeds a simulator row may take to catch its broken model (from the
#                             first seed the registry gives it: wasmkeep-sim --list-mutants)
#
# Slow (the cluster rows start real processes, the simulator rows run up to 200 seeds each):
# not part of the default suite. Its last table is recorded in docs/STATUS.md.
set -u
cd "$(dirname "$0")/.."
build=${1:-build/ci}
only=${CHECK_PROOFS_ONLY:-}
with_cluster=${CHECK_PROOFS_CLUSTER:-1}
backend=${CHECK_PROOFS_BACKEND:-file}
seeds=${CHECK_PROOFS_SEEDS:-200}
logs=$(mktemp -d /tmp/wasmkeep-check-proofs.XXXXXX)

cluster_test="$build/src/cluster/wk_cluster_test"
replica_test="$build/src/replica/wk_replica_test"
alarms_test="$build/src/alarms/wk_alarms_test"
engine_test="$build/src/engine/wk_engine_test"
actor_test="$build/src/actor/wk_actor_test"
control_test="$build/src/control/wk_control_test"
examples_test="$build/examples/examples_test"
server_test="$build/src/server/wk_quarantine_service_test"
socket_hub_test="$build/src/routing/wk_socket_hub_test"
front_test="$build/src/routing/wk_front_test"
sim="$build/sim/wasmkeep-sim"
wk="$build/src/cli/wasmkeep"
needed=("$cluster_test" "$replica_test" "$alarms_test" "$engine_test" "$actor_test" "$control_test" "$examples_test" "$server_test" "$sim")
[ "$with_cluster" = 1 ] && needed+=("$wk")
for f in "${needed[@]}"; do
  [ -x "$f" ] || { echo "check-proofs: $f is missing: build it first (cmake --build --preset ci)"; exit 2; }
done

# One rule a line: RULE | BROKEN MODEL | KIND | TEST | FAILING CHECK (cluster rows)
#   gtest    TEST is BINARY:Suite.Name (BINARY: cluster, replica, alarms, engine, actor, control,
#            examples (the example actors' tests) or quarantine, the server's quarantine tests)
#   sim      TEST is a scenario; the broken model is its --mutant
#   cluster  TEST is a tests/cluster suite; FAILING CHECK is text of the check line that must FAIL
rows=$(cat <<'ROWS'
§1 old formats never free|free-on-old-format|gtest|cluster:OwnersTest.AnOldFormatHeartbeatFreesNothing|
§1 old formats never free (real processes)|free-on-old-format|cluster|ownership|an old-format heartbeat frees nothing
§1 each lease write bounded by (ttl - safety) / 3|lease-attempt-unbounded|gtest|cluster:LeaseTest.ASlowLeaseWriteIsCutAtTheAttemptTimeoutAndRetriedWithinThePeriod|
§1 a failed lease write retried within its period|lease-no-retry|gtest|cluster:LeaseTest.ASlowLeaseWriteIsCutAtTheAttemptTimeoutAndRetriedWithinThePeriod|
§1 validity from the send, not the reply|validity-from-reply|gtest|cluster:LeaseTest.ValidityRunsFromTheSendNotTheReply|
§1 validity from the send, not the reply (simulator)|validity-from-reply|sim|lease|
§1 validity never returns within an epoch|ack-after-lapse-keeps-epoch|gtest|cluster:LeaseTest.AnAcknowledgementAfterValidityEndedStartsANewEpoch|
§1 the start check waits ttl + grace, even with no object|start-check-no-wait|gtest|cluster:LeaseTest.FreshNodeWaitsTtlPlusGraceThenRenewsEveryPeriod|
§1 the start check's shortcut after a release|no-release-shortcut|gtest|cluster:LeaseTest.RestartAfterARelease_TakesTheShortcut|
§1 own instance fenced during the first write = lost|own-fence-not-lost|gtest|cluster:LeaseTest.AFirstWriteThatLandedAndWasFencedLosesTheLease|
§1 conflict re-read: a lost reply is adopted|conflict-is-lost|gtest|cluster:LeaseTest.ALostReplyIsAdoptedNotTakenForAFence|
§1 conflict re-read: a fence makes the node lose its lease|lease-write-unconditional|gtest|cluster:LeaseTest.AFenceMakesTheNodeLoseItsLease|
§1 a heartbeat in flight during a fence is refused (real processes)|lease-write-unconditional|cluster|lease|the heartbeat in flight during the fence was refused
§1 a lease that ran out is not lost|lapse-is-lost|gtest|cluster:LeaseTest.AnOutageLapsesTheLeaseWithoutLosingIt|
§1 twins caught by the start check|start-check-ignores-changes|gtest|cluster:LeaseTest.ATwinIsRefusedAndTheRunningNodeIsUnaffected|
§2 the watch counts from the read|watch-from-listing-start|gtest|cluster:FenceWatchTest.TheWatchRunsFromTheReadNotFromTheListingsStart|
§1 the ETag-aware listing reads a restart under the same id|listing-assumes-renewals|gtest|cluster:MembershipTest.ARestartUnderTheSameIdIsReadAtTheFirstListingAfterItsWrite|
§1 the ETag-aware listing: views converge (simulator)|listing-assumes-renewals|sim|lease|
§2 the watch after the fencer's own lapse|no-watch-wait|sim|lease|
§2 a fence is conditional|unconditional-fence|sim|lease|
§2 a fence decided on a stale read is refused|unconditional-fence|gtest|cluster:FenceWatchTest.AFenceDecidedOnAStaleReadIsRefusedByItsCondition|
§2 at most 8 fences at once|unbounded-fence-concurrency|gtest|cluster:FenceWatchTest.AtMostEightFencesAtOnce|
§2 cluster fence is conditional|operator-fence-unconditional|gtest|cluster:OperatorTest.FenceOnAStaleVersionIsRefused|
§2 cluster fence of an absent node checks the operator's clock|operator-fence-trusts-clock|gtest|cluster:OperatorTest.FenceOfAnAbsentNodeChecksTheOperatorsClockAgainstTheBuckets|
§2 freeing: ttl + grace after a fence|free-ignores-fence-bound|gtest|cluster:OwnersTest.AFencedNodesActorIsTakenAtTheNextGenerationAfterTheBound|
§2 freeing: ttl + grace after a release|free-ignores-fence-bound|gtest|cluster:OwnersTest.AReleasedNodesActorIsTakenAtTheNextGenerationAfterTheBound|
§2 freeing: a fenced node's actors after the bound (real processes)|free-ignores-fence-bound|cluster|ownership|not before the bound
§2 freeing: a fresh read of nodes/A, not the view|free-on-view|sim|ownership|
§2 freeing: an absent nodes/A frees nothing|free-on-absent-node|gtest|cluster:OwnersTest.ADeletedHeartbeatFreesNothing|
§2 freeing: an absent nodes/A frees nothing (simulator)|free-on-absent-node|sim|ownership|
§2 freeing: another live instance frees (restart)|restart-frees-nothing|gtest|cluster:OwnersTest.ARestartedNodeTakesItsPredecessorsActorBackAtANewGeneration|
§6 an actor without a record starts above its log|unseeded-first-generation|gtest|cluster:FirstGenerationTest.AnActorWithoutARecordStartsAboveEveryGenerationInItsLog|
§6 a lost record: acquired above the log, restored whole|unseeded-first-generation|gtest|replica:ReplicaTest.AnActorWhoseRecordWasLostIsAcquiredAboveItsLogAndRestoresEverything|
§6 the upgrade seeds above every segment (real processes)|unseeded-first-generation|cluster|upgrade|the found actor is acquired above every generation in its log
§6 a live old lease refuses, even naming this node|old-lease-ignored|gtest|cluster:FirstGenerationTest.ALiveOldLeaseRefusesEvenWhenItNamesThisNode|
§6 a live old lease refuses, even naming this node (real processes)|old-lease-ignored|cluster|upgrade|a live old lease naming this node's own id is refused
§6 the start guard waits for fresh old heartbeats|start-guard-off|gtest|cluster:StartGuardTest.AFreshOldHeartbeatHoldsTheFirstWriteUntilItCannotBeRunning|
§6 the start guard waits for fresh old heartbeats (real processes)|start-guard-off|cluster|upgrade|the start guard held its first write
§3 every acquisition at generation + 1|wake-reuses-generation|gtest|cluster:OwnersTest.AcquireReleaseReacquireNeverReusesAGeneration|
§3 every acquisition at generation + 1 (simulator)|wake-reuses-generation|sim|ownership|
§3 a lapse ends every hold into pending releases|lapse-keeps-holds|gtest|cluster:OwnersTest.ALapseEndsHoldsIntoPendingReleasesThatLandLater|
sleeping holds: a released sleeping hold is never woken|wake-acquires-nothing-after-release|gtest|cluster:OwnersTest.AReleasedSleepingHoldIsNeverWoken|
sleeping holds: a lapse ends every sleeping hold|sleeping-hold-survives-lease-loss|gtest|cluster:OwnersTest.ALapseEndsSleepingHoldsAndADrainingNodeKeepsNone|
sleeping holds: a woken hold restores its own segments|wake-forgets-own-segments|gtest|replica:ReplicaTest.AWokenHoldContinuesItsOwnLogWhereItSlept|
§3 a pending release never applies to a later hold|pending-release-adopts-version|gtest|cluster:OwnersTest.APendingReleaseNeverAppliesToALaterHold|
§3 a pending release never applies to a later hold (real processes)|pending-release-adopts-version|cluster|ownership|the parked release of generation 1 did not free it
§3 at most 32 pending entries at once|unbounded-pending-concurrency|gtest|cluster:OwnersTest.AtMost32PendingReleasesAreSentAtOnce|
§3 a pass stops after 32 refusals in a row|no-refusal-limit|gtest|cluster:OwnersTest.APassStopsAfter32RefusalsInARow|
§3 pending releases pause while the lease is invalid|pending-retries-while-invalid|gtest|cluster:OwnersTest.PendingReleasesPauseWhileTheLeaseIsInvalid|
§3 an unknown acquire is read back under the lock|no-acquire-read-back|gtest|cluster:OwnersTest.ALostAcquireReplyIsReadBackAsOurs|
§3 the resolver releases an acquire that landed|resolver-never-releases|gtest|cluster:OwnersTest.AnAcquireWithUnknownOutcomeIsReleasedIfItLanded|
§3 the resolver releases an acquire that landed (real processes)|resolver-never-releases|cluster|ownership|the resolver released it
§3 an acquire whose write never lands is closed|unresolved-never-closed|gtest|cluster:OwnersTest.AnAcquireWhoseWriteNeverLandsIsClosedAndTheDrainEnds|
§3 one lock per actor (resolver)|resolver-without-lock|gtest|cluster:OwnersTest.ASecondAcquireAtTheSameGenerationIsNeverReleasedByTheResolver|
§3 one lock per actor (resolver, real processes)|resolver-without-lock|cluster|ownership|the hold lives
§3 one lock per actor (resolver, simulator)|resolver-without-lock|sim|ownership|
§3 nothing is sent after the lease is lost|resolver-ignores-lost|gtest|cluster:OwnersTest.NothingIsSentAfterTheLeaseIsLost|
§3 routing: an owner not live is acquired here|route-to-any-owner|gtest|cluster:OwnersTest.ARecordNamingANodeThatIsNotLiveIsAcquiredHere|
§3 routing: one read within 250 ms|routing-read-unbounded|gtest|cluster:OwnersTest.TheRoutingReadGivesUpAfterTheAdmissionWait|
§4 clean stop: lease locally invalid at once|stop-keeps-lease-valid|gtest|cluster:LeaseTest.CleanStopCutsAtOnceAndWritesReleasedKeepingWrittenAt|
§4 clean stop: the lease-level cut of a straggler (real processes)|stop-keeps-lease-valid|cluster|ownership|the lease-level cut made the straggler's upload Late
§4 clean stop: release holds before released|stop-skips-releases|gtest|cluster:OwnersTest.CleanStopReleasesThenWritesReleased|
§4 a drain reports drained only with nothing pending|drain-ignores-pending|gtest|cluster:OwnersTest.DrainReportsDrainedOnlyWhenNothingIsPending|
§4 a drain reports drained only with nothing pending (real processes)|drain-ignores-pending|cluster|ownership|the drain does not report drained
§3 a move's target takes the actor only once the release landed|move-acquires-before-release-lands|gtest|cluster:HandOverTest.AMoveTellsItsTargetOnlyOnceTheReleaseLandedAndTheTargetTakesItAtTheNextGeneration|
§3 a move's target takes the actor only once the release landed (simulator)|move-acquires-before-release-lands|sim|move|
§3 a move's take is conditioned on the released version|take-unconditional|gtest|cluster:HandOverTest.ATakeFromAReleaseThatSomeoneElseFollowedIsRefusedByItsCondition|
§3 a move's take is conditioned on the released version (simulator)|take-unconditional|sim|move|
§4 a drain reports drained only with nothing pending (simulator: drains racing moves)|drain-ignores-pending|sim|move|
§4 a drain closes resident actors before releasing them|drain-releases-under-actors|gtest|cluster:HandOverTest.AResidentActorIsClosedThenReleasedAndNothingStartsOnItMeanwhile|
§4 a drain closes resident actors before releasing them (real processes)|drain-releases-under-actors|cluster|drain|before releasing it
gate: released only when durable|ack-before-durable|gtest|replica:HoldGateTest.ASequenceIsReleasedOnceDurableWhileTheHoldIsValid|
gate: released only when durable (simulator)|ack-before-durable|sim|storage|
gate: an acknowledgement after validity ended is Late|ack-late-upload|gtest|replica:ReplicaTest.AnUploadAcknowledgedAfterValidityEndedIsLateAndAcknowledgesNothing|
gate: an acknowledgement after validity ended is Late (simulator)|ack-late-upload|sim|storage|
gate: every release asks the hold|release-without-validity|gtest|replica:ReplicaTest.AnAlreadyDurableSequenceIsRefusedOnceTheHoldIsInvalid|
gate: every release asks the hold (simulator)|release-without-validity|sim|storage|
gate: every release asks the hold (routing)|release-without-validity|sim|routing|
gate: every answer through the gate (routing)|answer-without-gate|sim|routing|
input gate: one event of an actor at a time (routing)|input-gate-concurrent|sim|routing|
idempotency: a key's answer is committed in the batch of its writes|idempotent-answer-not-in-batch|gtest|actor:RuntimeTest.TheRecordIsInTheBatchOfItsWritesAndAFailedEventStoresNone|
idempotency: a key's answer is committed in the batch of its writes (real processes)|idempotent-answer-not-in-batch|cluster|idempotency|keyed increments under kill -9
idempotency: a key's answer is committed in the batch of its writes (simulator)|idempotent-answer-not-in-batch|sim|combined|
messages: nothing sent before its batch is durable (simulator)|message-before-durable|sim|messages|
websockets: nothing sent before its batch is durable|ws-send-before-durable|gtest|examples:Builds/ChatTest.WebSocketSendsWaitForTheBatchToBeDurable/Cpp|
websockets: nothing sent before its batch is durable (simulator)|ws-send-before-durable|sim|combined|
websockets: a broadcast goes to the connections its event saw|ws-broadcast-at-release|gtest|sockethub:SocketHubTest.ABroadcastGoesToTheConnectionsItsEventSawNotToOnesOpenedSince|
websockets: a broadcast goes to the connections its event saw (simulator)|ws-broadcast-at-release|sim|combined|
class versions: an actor's place in a rollout is stable in its name|rollout-unstable|gtest|control:ChooseVersionTest.TheCandidatesShareIsStableInTheNameAndOnlyGrows|
class versions: a migration's writes commit with its version mark|upgrade-outside-batch|gtest|examples:ClassVersionsRuntimeTest.TheMarkCommitsWithTheMigrationSoARestartNeverMigratesAgain|
class versions: a broken version's state whose migration failed runs nowhere|broken-state-runs|gtest|examples:ClassVersionsRuntimeTest.AFailedMigrationOfABrokenVersionsStateRunsNothing|
class versions: a broken version's state whose migration failed runs nowhere (simulator)|broken-state-runs|sim|combined|
tenants: a tenant flooding a worker delays another's job by at most one of its own|fair-share-off|gtest|actor:FairQueueTest.AFloodingTenantDelaysAnothersJobByAtMostOneOfItsOwn|
tenants: a request refused 429 by a quota ran nothing|quota-after-run|gtest|front:FrontTest.ATenantOverItsRequestQuotaGets429WithRetryAfterAndOthersDoNot|
tenants: a request refused 429 by a quota ran nothing (simulator)|quota-after-run|sim|combined|
tenants: an idle tenant's job waits for at most one job of each busy tenant (real processes)|fair-share-off|cluster|tenants|no job of an idle tenant waited
tenants: events at once cannot together pass a stored_bytes quota|stored-quota-unreserved|gtest|actor:TxnTest.ATenantsEventsAtOnceCannotTogetherPassItsStoredBytesQuota|
tenants: a start at the tenant's resident share makes room or is refused|resident-share-ignored|gtest|actor:RuntimeCoreTest.AtItsResidentShareATenantsIdleActorMakesRoomOrTheStartIsRefused|
usage: a slower integrator's write never replaces a newer count of stored byte-seconds|stored-usage-unconditional|gtest|control:StoredUsageTest.ASlowerIntegratorsWriteNeverReplacesANewerCount|
class versions: an actor's place in a rollout is stable in its name (simulator)|rollout-unstable|sim|combined|
class versions: a migration's writes commit with its version mark (simulator)|upgrade-outside-batch|sim|combined|
messages: the applied record is in the handler's batch (simulator)|applied-record-not-in-batch|sim|messages|
messages: a restored outbox is delivered (simulator)|outbox-lost-on-restore|sim|messages|
messages: one sender's messages to one receiver one at a time, in order (simulator)|messages-out-of-order|sim|messages|
messages: a sender nobody calls is started by the alarm index's scanners (simulator)|outbox-never-wakes|sim|messages|
messages: a killed sender nobody calls still delivers (real processes)|outbox-never-wakes|cluster|bank|the credit arrives with nobody calling the sender
messages: the applied record is in the handler's batch (real processes)|applied-record-not-in-batch|cluster|bank|money is conserved exactly
restore follows the owner fences|restore-ignores-fence|gtest|replica:ReplicaTest.ASegmentOfAnOlderHoldThatLandedAfterTheNextRestoreIsOffTheChain|
restore follows the owner fences (simulator)|restore-ignores-fence|sim|storage|
GC never deletes the chain|gc-deletes-chain|gtest|replica:GcTest.CoveredSegmentsAndOlderSnapshotsGoTheFenceAndTheTailStay|
GC never deletes the chain (simulator)|gc-deletes-chain|sim|storage|
history: GC keeps what the retention window needs (simulator)|gc-ignores-retention|sim|storage|
history: GC keeps what the retention window needs (routing)|gc-ignores-retention|sim|routing|
history: a restore writes under a hold of its own (simulator)|restore-without-acquire|sim|storage|
history: a restore writes under a hold of its own (routing)|restore-without-acquire|sim|routing|
history: the history follows the owner fences (simulator)|history-ignores-fence|sim|storage|
history: the history follows the owner fences (routing)|history-ignores-fence|sim|routing|
alarms: the segment setting an alarm waits for its index entry|segment-before-entry|gtest|alarms:AlarmIndexTest.TheSegmentSettingAnAlarmLandsOnlyAfterItsEntry|
alarms: the segment setting an alarm waits for its index entry (simulator)|segment-before-entry|sim|alarms|
alarms: an earlier hold's entry goes only once this hold's fence landed|earlier-entries-before-fence|gtest|alarms:AlarmIndexTest.AnEarlierHoldsEntryGoesOnlyOnceThisHoldsFenceLanded|
alarms: an entry goes only once the change is durable|index-entry-removed-before-durable|gtest|alarms:AlarmIndexTest.AnEntryGoesOnlyOnceTheChangeThatReplacedItIsDurable|
alarms: an entry goes only once the change is durable (simulator)|index-entry-removed-before-durable|sim|alarms|
alarms: never before its time|fire-before-due|gtest|alarms:AlarmServiceTest.TheOwnersTimerFiresAtTheAlarmsTimeAndNotBefore|
alarms: never before its time (simulator)|fire-before-due|sim|alarms|
alarms: a handed alarm is looked at again (simulator)|drop-handed-alarm|sim|alarms|
drain: a starting node takes nothing before its first drain check|drain-accepts-before-check|gtest|cluster:DrainControlClusterTest.ANodeStartedWhileDrainedTakesNoActorFromItsFirstMoment|
drain: a draining node's alarm shards go to the peers that serve|shard-rank-includes-drained|gtest|alarms:AlarmServiceTest.TheShardsOfADrainingNodeGoToThePeersThatServe|
quarantine: an alarm never starts a quarantined actor|alarm-wakes-quarantined|gtest|alarms:AlarmServiceTest.AQuarantinedActorIsNotStartedByItsAlarmAndFiresOnceLifted|
drain: a draining node's alarm shards go to the peers that serve (real processes)|shard-rank-includes-drained|cluster|drain|while a stays drained, b and c fire every alarm due after the drain
quarantine: an alarm never starts a quarantined actor (real processes; both reads off: the delivery's and the start's)|alarm-wakes-quarantined,start-skips-quarantine-read|cluster|quarantine|and no node started an alarm event since the quarantine
quarantine: every start reads the record when the node remembers nothing fresh|start-skips-quarantine-read|gtest|quarantine:QuarantineServiceTest.AStartReadsTheRecordWhenTheNodeRemembersNothing|
quarantine: a late answer never hides a newer quarantine|quarantine-cache-keeps-late-answer|gtest|control:QuarantineCacheTest.ALateAnswerNeverHidesANewerQuarantine|
quarantine: a listing sent before a strike landed never hides it|quarantine-cache-keeps-late-answer|gtest|control:QuarantineListingTest.AStrikeAnsweredWhileAListingWasOnItsWayIsNotHiddenByIt|
quarantine: a start trusts a listing for the cache's ttl only|quarantine-listing-outlives-ttl|gtest|control:QuarantineListingTest.AQuarantineImposedElsewhereIsSeenByAStartWithinTheTtl|
quarantine: an alarm never starts a quarantined sleeping hold|alarm-wakes-quarantined|gtest|alarms:AlarmServiceTest.ADeliveryToAHeldActorThatIsNotResidentRunsHereWithoutARoutingRead|
move: a lost answer of a take that landed is reported moved|move-outcome-unchecked|gtest|cluster:MoveOutcomeTest.ALostAnswerOfATakeThatLandedIsReportedMoved|
move: an outcome whose write failed is written again, never refused|move-outcome-unchecked|gtest|cluster:MoveOutcomeTest.AnOutcomeWhoseWriteFailedIsWrittenAgainNotRefused|
isolation: a reused memory reads as a new one|pool-skips-zeroing|gtest|engine:EngineTest.AReusedMemoryReadsAsANewOne|
isolation: a failed instantiation's memory is zeroed too|pool-skips-zeroing|gtest|engine:EngineTest.AFailedInstantiationsMemoryIsZeroedToo|
history: GC keeps the retention window|gc-ignores-retention|gtest|replica:HistoryTest.GarbageCollectionKeepsTheWindowAndCollectsWhatIsOlder|
history: GC keeps every batch a random history's window needs|gc-ignores-retention|gtest|replica:Seeds/RandomHistoryTest.RebuildsEveryBatchInTheWindow/0|
history: the chain follows the fences, late uploads left out|history-ignores-fence|gtest|replica:HistoryTest.FollowsTheFencesBackAndLeavesLateUploadsOut|
history: a restore is made as the owner, under a new hold (real processes)|restore-without-acquire|cluster|history|after the restore every key is as it was then
ROWS
)

# ---- runners: each returns 0 when the test passed, 1 when it failed

run_gtest() {  # BINARY FILTER BROKEN
  local bin=$cluster_test
  [ "${1%%:*}" = replica ] && bin=$replica_test
  [ "${1%%:*}" = alarms ] && bin=$alarms_test
  [ "${1%%:*}" = engine ] && bin=$engine_test
  [ "${1%%:*}" = actor ] && bin=$actor_test
  [ "${1%%:*}" = control ] && bin=$control_test
  [ "${1%%:*}" = examples ] && bin=$examples_test
  [ "${1%%:*}" = quarantine ] && bin=$server_test
  [ "${1%%:*}" = sockethub ] && bin=$socket_hub_test
  [ "${1%%:*}" = front ] && bin=$front_test
  local filter=${1#*:}
  WASMKEEP_BROKEN_MODELS="$2" "$bin" --gtest_filter="$filter" >"$3" 2>&1 || return 1
  grep -q "\[  PASSED  \] 1 test" "$3" || return 1  # the filter named exactly one test, which ran
}

declare -A sim_caught_at=()
sim_first_seed() {  # SCENARIO MUTANT: the registry's first seed for it (wasmkeep-sim --list-mutants), or 1
  "$sim" --list-mutants | awk -v s="$1" -v m="$2" '$1 == s && $2 == m { print $3; found = 1 } END { if (!found) print 1 }'
}
run_sim_on() {  # SCENARIO MUTANT LOG: 1 (failed) when caught; remembers the seed
  "$sim" --scenario "$1" --first-seed "$(sim_first_seed "$1" "$2")" --seeds "$seeds" --mutant "$2" \
    --expect-failure --quiet >"$3" 2>&1 || return 0
  sim_caught_at["$1/$2"]=$(sed -n 's/^FAILED at seed \([0-9]*\).*/\1/p' "$3" | head -1)
  return 1
}
run_sim_off() {  # SCENARIO MUTANT LOG: the seeds the mutant needed, without it
  local first n
  first=$(sim_first_seed "$1" "$2")
  n=$(( ${sim_caught_at["$1/$2"]:-$((first + seeds - 1))} - first + 1 ))
  "$sim" --scenario "$1" --first-seed "$first" --seeds "$n" --quiet >"$3" 2>&1
}

declare -A cluster_off=()
run_cluster_on() {  # SUITE BROKEN CHECK LOG: 1 when the named check failed
  WASMKEEP_BROKEN_MODELS="$2" tests/cluster/"$1"_test.sh "$wk" "$backend" >"$4" 2>&1 </dev/null
  if grep -q "^FAIL .*$3" "$4"; then return 1; fi
  return 0
}
run_cluster_off() {  # SUITE LOG: once per suite
  if [ -z "${cluster_off[$1]:-}" ]; then
    if tests/cluster/"$1"_test.sh "$wk" "$backend" >"$2" 2>&1 </dev/null; then cluster_off[$1]=pass; else cluster_off[$1]=fail; fi
  fi
  [ "${cluster_off[$1]}" = pass ]
}

printf '| %-66s | %-30s | %-100s | %-6s |\n' "rule" "broken model" "test" "caught"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 68))" "$(printf -- '-%.0s' $(seq 32))" "$(printf -- '-%.0s' $(seq 102))" "$(printf -- '-%.0s' $(seq 8))"
not_caught=0
n=0
while IFS='|' read -r rule broken kind test check; do
  [ -z "$rule" ] && continue
  if [ -n "$only" ] && ! grep -Eq -- "$only" <<<"$rule $broken $test"; then continue; fi
  if [ "$kind" = cluster ] && [ "$with_cluster" != 1 ]; then continue; fi
  n=$((n + 1))
  on="$logs/$n.on.log"
  off="$logs/$n.off.log"
  case "$kind" in
    gtest)
      name="${test#*:}"
      if run_gtest "$test" "$broken" "$on"; then failed_on=0; else failed_on=1; fi
      if run_gtest "$test" "" "$off"; then passed_off=1; else passed_off=0; fi ;;
    sim)
      name="sim.$test.mutant.$broken"
      if run_sim_on "$test" "$broken" "$on"; then failed_on=0; else failed_on=1; fi
      if run_sim_off "$test" "$broken" "$off"; then passed_off=1; else passed_off=0; fi
      [ $failed_on = 1 ] && name="$name (seed ${sim_caught_at["$test/$broken"]:-?})" ;;
    cluster)
      name="cluster.$test.$backend: $check"
      if run_cluster_on "$test" "$broken" "$check" "$on"; then failed_on=0; else failed_on=1; fi
      if run_cluster_off "$test" "$logs/cluster.$test.off.log"; then passed_off=1; else passed_off=0; fi
      off="$logs/cluster.$test.off.log" ;;
  esac
  if [ $failed_on = 1 ] && [ $passed_off = 1 ]; then
    caught=yes
  else
    caught=no
    not_caught=$((not_caught + 1))
    [ $failed_on = 0 ] && caught="no: passes with it ($on)"
    [ $passed_off = 0 ] && caught="no: fails without it ($off)"
  fi
  printf '| %-66s | %-30s | %-100s | %-6s |\n' "$rule" "\`$broken\`" "\`$name\`" "$caught"
done <<<"$rows"
echo
echo "$n rules, $((n - not_caught)) caught, $not_caught not caught (logs in $logs)"
[ "$not_caught" -eq 0 ]
