#!/usr/bin/env bash
# model/check.sh: model-check quorumlock's protocol with SPIN (docs/verification.md).
#
#   model/check.sh            every configuration below (make model)
#   model/check.sh quick      the small ones (make test): seconds
#   model/check.sh NAME...    the configurations named
#   model/check.sh -update    also write each counterexample's `spin -t -p`
#                             output to faultinject/sim/testdata/model/NAME.trail
#
# For each configuration it prints the result, the states stored and
# matched, the depth reached, the verifier's memory (MB) and its seconds.
#
# Each configuration is a model (redlock.pml, shapes.pml, queue.pml or reconfig.pml), its -D flags, and
# what it must give: "pass" (every property holds in every reachable state:
# 0 errors, search completed) or "violate PROPERTY" (a counterexample that
# breaks that property: the mechanism switched off, or the documented
# unsafe condition, is shown able to fail). A configuration that gives
# anything else fails the run. Counterexamples are searched breadth-first
# (the shortest trail). A liveness configuration (search "ltl NAME",
# queue.pml's LTL property NAME) is searched depth-first for an acceptance
# cycle (a run in which the property fails, forever); its counterexample
# is "violate NAME".
#
# Needs spin (Debian: apt-get install spin) and gcc. MEMLIM (MB, default
# 4000) bounds each verifier's memory; only one verifier runs at a time.
# FLAGS (extra -D flags, default none) is added to every configuration's
# flags: a check of the harness itself, e.g.
# `FLAGS=-DNO_DRIFT model/check.sh safe-quick` must fail (exit 1), for the
# mechanism switched off breaks a configuration that must pass. OUT is
# where each configuration's files go (pan.out, and trail.txt for a
# counterexample); by default a new directory under $TMPDIR, removed when
# every configuration gives what it must.
# Exit status: 0 every configuration gave what it must, 1 one did not,
# 2 spin, gcc or an unknown configuration name.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
memlim=${MEMLIM:-4000}
extra=${FLAGS:-}
update=0

# name | model | flags | expect | quick | search (counterexamples: bfs, the
# default, or bitstate: a depth-first bitstate search, for a counterexample
# too deep for breadth-first search in memory; "ltl NAME": the liveness
# property NAME, passes and counterexamples alike)
configs=(
# ---- the protected protocol: every property holds ----
"safe-network|redlock|-DDELAY -DSPLIT -DEXTENDS=1 -DWRITES|pass|"
"safe-loss|redlock|-DLOSS -DEXTENDS=1 -DWRITES|pass|"
"safe-clocks|redlock|-DFAST -DDELAY -DSPLIT -DEXTENDS=1 -DWRITES|pass|"
"safe-clocks-2|redlock|-DA=2 -DFAST -DSPLIT -DEXTENDS=1 -DWRITES|pass|"
"safe-clocks-3|redlock|-DC=3 -DFAST -DWRITES|pass|"
"safe-restarts|redlock|-DQUAR -DRESTARTS=2 -DRESTART_EMPTY -DRESTART_KEEP -DSPLIT -DLATE -DDELAY|pass|"
"safe-restarts-2|redlock|-DA=2 -DQUAR -DRESTARTS=1 -DRESTART_EMPTY -DLATE -DSPLIT|pass|"
"safe-restarts-3|redlock|-DC=3 -DQUAR -DRESTARTS=1 -DRESTART_EMPTY -DLATE|pass|"
"safe-pauses|redlock|-DMPAUSE -DBACKLOG -DDELAY -DSPLIT|pass|"
"safe-fencing|redlock|-DFENCING -DQUAR -DRESTARTS=2 -DRESTART_EMPTY -DDELAY -DCPAUSE|pass|"
"safe-writeback|redlock|-DFENCING -DCSKEW -DDELAY -DSPLIT|pass|"
"safe-fencing-unsafe|redlock|-DFENCING -DJUDGE_WRITES -DJUMP -DCPAUSE -DRESTARTS=1 -DRESTART_EMPTY -DBEYOND|pass|"
"safe-semaphore|shapes|-DSEM -DFAST -DRESTARTS=1|pass|"
"safe-rw|shapes|-DRW -DFAST -DRESTARTS=1|pass|"
"safe-lockdelay|redlock|-DLOCKDELAY -DFAST -DDELAY -DSPLIT -DEXTENDS=1|pass|"
"safe-lockdelay-restarts|redlock|-DLOCKDELAY -DFAST -DQUAR -DRESTARTS=1 -DRESTART_EMPTY -DLATE -DEXTENDS=1|pass|"
"safe-quick|redlock|-DQUAR -DRESTARTS=1 -DRESTART_EMPTY -DFAST -DWRITES|pass|quick"
"safe-fencing-stale|redlock|-DFENCING -DPRIOR -DQUAR -DRESTARTS=2 -DRESTART_STALE -DRESTART_KEEP -DLATE|pass|"
"safe-boot-step|redlock|-DQUAR -DRESTARTS=1 -DRESTART_EMPTY -DBOOT_STEP -DLATE|pass|"
"safe-strobe|redlock|-DSTROBE -DEXTENDS=1 -DWRITES|pass|"
# ---- documented unsafe conditions: a counterexample each ----
"unsafe-restart|redlock|-DRESTARTS=1 -DRESTART_EMPTY|violate mutual-exclusion|quick"
"unsafe-jump|redlock|-DJUMP -DWRITES -DJUDGE_WRITES|violate fresh-writes|quick"
"unsafe-pause|redlock|-DCPAUSE|violate fresh-writes|quick"
# ---- each mechanism switched off (internal/knobs): a counterexample each ----
"NoQuarantine|redlock|-DQUAR -DNO_QUARANTINE -DRESTARTS=1 -DRESTART_EMPTY|violate mutual-exclusion|quick"
"NoVoteIdentity|redlock|-DQUAR -DNO_VOTE_ID -DRESTARTS=1 -DRESTART_EMPTY|violate mutual-exclusion|quick"
"NoDrift|redlock|-DFAST -DNO_DRIFT|violate mutual-exclusion|quick"
"NoReleaseGuard|redlock|-DDELAY -DNO_GUARD|violate release-guard|quick"
"NoFenceEpoch|redlock|-DA=2 -DFENCING -DQUAR -DRESTARTS=2 -DRESTART_EMPTY -DNO_EPOCH|violate token-order||bitstate"
"NoFenceWriteBack|redlock|-DFENCING -DCSKEW -DNO_WRITEBACK|violate token-order|quick"
"DialTimeoutNotSent|redlock|-DMPAUSE -DBACKLOG -DDIAL_NOTSENT|violate no-orphans|quick"
"NoLockDelay|redlock|-DLOCKDELAY -DNO_LOCKDELAY|violate lock-delay|quick"
"NoShapeQuorum|shapes|-DSEM -DNO_SHAPE_QUORUM|violate semaphore-bound|quick"
"NoExtendCheck|redlock|-DEXTENDS=1 -DNO_EXTEND_CHECK|violate extend-after-end|quick"
"NoRunStamp|redlock|-DFENCING -DPRIOR -DQUAR -DRESTARTS=1 -DRESTART_STALE -DLATE -DNO_RUN_STAMP|violate token-order|quick"
"WallUptime|redlock|-DQUAR -DRESTARTS=1 -DRESTART_EMPTY -DBOOT_STEP -DLATE -DWALL_UPTIME|violate mutual-exclusion|quick"
# ---- the waiting line and its wake-ups (queue.pml; docs/verification.md,
# "The waiting line") ----
"queue-safe|queue|-DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1|pass|quick"
"queue-plain|queue|-DPLAIN -DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1|pass|quick"
"queue-3|queue|-DC=3 -DNO_BACKOFF|pass|"
"queue-live|queue|-DLIVE -DC=2 -DNO_BACKOFF -DGIVEUPS=1|pass|quick|ltl granted"
"queue-live-plain|queue|-DLIVE -DPLAIN -DC=2 -DNO_BACKOFF -DGIVEUPS=1|pass|quick|ltl granted"
"queue-live-faults|queue|-DLIVE -DC=2 -DLOSSN -DDIES=1|pass|quick|ltl granted"
"queue-live-late|queue|-DLIVE -DC=2 -DSPLIT -DDELAY -DLATES=1|pass||ltl granted"
"queue-split|queue|-DLIVE -DC=2 -DLOSSN -DSPLIT -DLATES=1|pass||ltl granted"
# each rule switched off: a counterexample each
"NoLeaveTombstone|queue|-DC=3 -DDELAY -DLATES=1 -DGIVEUPS=1 -DNO_TOMBSTONE|violate kept-out|quick"
"NoFairRequeue|queue|-DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1 -DNO_REQUEUE|violate kept-out|quick"
"NoFreshLook|queue|-DLIVE -DC=2 -DNO_BACKOFF -DNO_FRESH|violate granted|quick|ltl granted"
"GrantTombstone|queue|-DLIVE -DC=2 -DLOSSN -DSPLIT -DLATES=1 -DGRANT_TOMB|violate granted||ltl granted"
# the one-round-trip handoff as the code builds it (GRANT: a release hands
# the key to the line's first waiter, who keeps its place until it takes
# the key over; no hold on grants; docs/handoff.md, docs/verification.md,
# "The waiting line"). GRANT_OLD (not listed) is the handoff as first
# modelled (the waiter leaves the line at the hand-over, a call holds with
# grants)
"grant-safe-quick|queue|-DGRANT -DC=2 -DLOSSN -DGIVEUPS=1 -DDIES=1|pass|quick"
"grant-safe|queue|-DGRANT -DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1|pass|"
"grant-plain|queue|-DGRANT -DPLAIN -DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1|pass|"
"grant-live|queue|-DLIVE -DGRANT -DC=2 -DNO_BACKOFF -DGIVEUPS=1|pass|quick|ltl granted"
"grant-live-plain|queue|-DLIVE -DGRANT -DPLAIN -DC=2 -DNO_BACKOFF -DGIVEUPS=1|pass|quick|ltl granted"
"grant-live-faults|queue|-DLIVE -DGRANT -DC=2 -DLOSSN -DDIES=1|pass|quick|ltl granted"
"grant-live-delay|queue|-DLIVE -DGRANT -DC=2 -DDELAY -DLATES=1|pass||ltl granted"
"grant-live-split|queue|-DLIVE -DGRANT -DC=2 -DSPLIT -DLATES=1|pass||ltl granted"
# each of its rules switched off: a counterexample each
"NoGrantTakeover|queue|-DLIVE -DGRANT -DC=2 -DNO_TAKEOVER|violate granted|quick|ltl granted"
"NoGrantLeaveRelease|queue|-DGRANT -DC=2 -DGIVEUPS=1 -DNO_LEAVE_RELEASE|violate grant-released|quick"
"GrantPlainNoRequeue|queue|-DGRANT -DPLAIN -DNO_PLAIN_REQUEUE -DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1|violate grant-released|quick"
# the hold on grants (GRANT_HOLD: the code's form with H1-H5; a call
# holds with the grants of the masters that refused its failed attempt,
# no new round; docs/handoff.md, docs/verification.md "The one-round-trip
# handoff")
"grant-hold-safe-quick|queue|-DGRANT_HOLD -DC=2 -DLOSSN -DGIVEUPS=1 -DDIES=1|pass|quick"
"grant-hold-safe|queue|-DGRANT_HOLD -DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1|pass|"
"grant-hold-plain|queue|-DGRANT_HOLD -DPLAIN -DC=2 -DSPLIT -DDELAY -DLATES=1 -DGIVEUPS=1|pass|"
# refusals' replies late too (SPLITNO): a master that did not answer must
# not count
"grant-hold-late|queue|-DGRANT_HOLD -DC=2 -DSPLIT -DSPLITNO -DLATES=1 -DGIVEUPS=1|pass|"
"grant-hold-live|queue|-DLIVE -DGRANT_HOLD -DC=2 -DNO_BACKOFF -DGIVEUPS=1|pass|quick|ltl granted"
"grant-hold-live-plain|queue|-DLIVE -DGRANT_HOLD -DPLAIN -DC=2 -DNO_BACKOFF -DGIVEUPS=1|pass|quick|ltl granted"
"grant-hold-live-faults|queue|-DLIVE -DGRANT_HOLD -DC=2 -DLOSSN -DDIES=1|pass|quick|ltl granted"
"grant-hold-live-delay|queue|-DLIVE -DGRANT_HOLD -DC=2 -DDELAY -DLATES=1|pass||ltl granted"
"grant-hold-live-split|queue|-DLIVE -DGRANT_HOLD -DC=2 -DSPLIT -DLATES=1|pass||ltl granted"
# a check of the checks: a hold on grants is reachable (its trail: one)
"grant-hold-reach|queue|-DGRANT_HOLD -DC=2 -DREACH|violate hold-by-grants|quick"
# each of its rules switched off: a counterexample each
"NoGrantCurrentValue|queue|-DGRANT_HOLD -DC=2 -DSPLIT -DLATES=1 -DNO_BACKOFF -DNO_CURVAL -DNO_HOLDS|violate mutual-exclusion|quick"
"GrantHoldUnanswered|queue|-DGRANT_HOLD -DHOLD_UNANSWERED -DC=3 -DSPLIT -DSPLITNO -DLATES=1 -DNO_BACKOFF -DNO_HOLDS|violate mutual-exclusion|quick|bitstate"
"GrantHoldLeaveAll|queue|-DGRANT_HOLD -DHOLD_LEAVE_ALL -DC=3 -DNO_BACKOFF -DNO_HOLDS|violate mutual-exclusion|quick"
"NoGrantHoldRelease|queue|-DGRANT_HOLD -DNO_HOLD_RELEASE -DC=2 -DSPLIT -DLATES=1|violate kept-out|quick"
# limits the model found (docs/verification.md, "The waiting line")
"queue-tombstone-ttl|queue|-DC=2 -DDELAY -DSTRAG=3|violate kept-out|quick"
"queue-late-reply|queue|-DLIVE -DC=2 -DNO_BACKOFF -DSPLIT -DLATES=1|violate granted|quick|ltl granted"
# ---- changing the masters online (reconfig.pml; docs/reconfig.md,
# docs/verification.md "Changing the masters") ----
"reconfig-steps|reconfig||pass|quick"
"reconfig-swap|reconfig|-DSWAP|violate mutual-exclusion|quick"
"reconfig-nocheck|reconfig|-DNO_CFG_CHECK|violate mutual-exclusion|quick"
"reconfig-nowait|reconfig|-DNO_WAIT|violate mutual-exclusion|quick"
# the wait without the step rule: a swap as one step, records checked
"reconfig-swap-step|reconfig|-DPLAN_SWAP|violate mutual-exclusion|quick"
# how long the wait must be on exact clocks: the validity (2 ticks), not less
"reconfig-wait-validity|reconfig|-DW=2|pass|"
"reconfig-wait-short|reconfig|-DW=1|violate mutual-exclusion|"
# leases extended across the steps, moving to the new epoch, with W = V:
# the renewal interval is not needed in the wait (exact clocks)
"reconfig-extend|reconfig|-DEXTENDS=1 -DW=2|pass|"
# the swap through joint mode: {0,1,2} -> joint({0,1,2}, {0,1,3}) ->
# {0,1,3}, each step followed by the wait (and with extends, W = V); its
# twins count a joint round on one set only: the new one, the old one
"reconfig-joint|reconfig|-DPLAN_JOINT|pass|quick"
"reconfig-joint-extend|reconfig|-DPLAN_JOINT -DEXTENDS=1 -DW=2|pass|"
"reconfig-joint-abort|reconfig|-DPLAN_JOINT_ABORT|pass|quick"
"reconfig-joint-abort-extend|reconfig|-DPLAN_JOINT_ABORT -DEXTENDS=1 -DW=2|pass|"
"reconfig-joint-one-set|reconfig|-DPLAN_JOINT -DJOINT_ONE_SET|violate mutual-exclusion|quick"
"reconfig-joint-old-set|reconfig|-DPLAN_JOINT -DJOINT_OLD_SET|violate mutual-exclusion|quick"
# fencing tokens across the steps, counters stamped with the epoch; the
# lock used before the records while master 3 was a master (token 1 on
# masters 0 and 3); its twin reads every counter as present
"reconfig-fence|reconfig|-DFENCING -DPRIOR_FENCE|pass|"
"reconfig-nostamp|reconfig|-DFENCING -DPRIOR_FENCE -DNO_CFG_STAMP|violate tokens|"
# masters that come back with an older record (ROLLBACKS): the run stamp
# makes it count as none; without it (NO_CFG_RUN) a stale client's votes
# there count
"reconfig-rollback|reconfig|-DROLLBACKS=1|pass|quick"
"reconfig-rollback-2|reconfig|-DROLLBACKS=2|pass|"
"reconfig-norun|reconfig|-DROLLBACKS=1 -DNO_CFG_RUN|violate mutual-exclusion|quick"
# ---- found by the model (docs/verification.md, "Found") ----
# a clock jump repeats a fencing token, fencing or not
"jump-fencing-3|redlock|-DC=3 -DFENCING -DJUDGE_WRITES -DJUMP|violate unique-tokens|"
)

want=()
for a in "$@"; do
	case $a in
	-update) update=1 ;;
	*) want+=("$a") ;;
	esac
done

if [ "$update" = 1 ] && [ -n "$extra" ]; then
	echo "model/check.sh: -update with FLAGS would write trails of other configurations" >&2
	exit 2
fi
for w in "${want[@]}"; do
	case $w in quick | all) continue ;; esac
	known=0
	for c in "${configs[@]}"; do [ "${c%%|*}" = "$w" ] && known=1; done
	[ "$known" = 1 ] || { echo "model/check.sh: no configuration $w" >&2; exit 2; }
done

command -v spin >/dev/null || { echo "model/check.sh: spin not found (Debian: apt-get install spin)" >&2; exit 2; }
command -v gcc >/dev/null || { echo "model/check.sh: gcc not found" >&2; exit 2; }
keep=1 out=${OUT:-}
if [ -z "$out" ]; then
	keep=0 # a directory of our own, removed if every configuration passes
	out=$(mktemp -d "${TMPDIR:-/tmp}/quorumlock-model.XXXXXX")
fi
mkdir -p "$out"

selected() { # name quick
	[ ${#want[@]} -eq 0 ] && return 0
	for w in "${want[@]}"; do
		[ "$w" = "$1" ] && return 0
		[ "$w" = quick ] && [ "$2" = quick ] && return 0
		[ "$w" = all ] && return 0
	done
	return 1
}

fails=0 ran=0 total_states=0
start_all=$(date +%s)
row() { printf '%-20s %-7s %-26s %10s %11s %5s %7s %7s  %s\n' "$@"; }
row configuration model result stored matched depth MB seconds flags
for c in "${configs[@]}"; do
	IFS='|' read -r name model flags expect quick search <<<"$c"
	flags="$flags${extra:+ $extra}"
	selected "$name" "$quick" || continue
	ran=$((ran + 1))
	d="$out/$name"
	rm -rf "$d"
	mkdir -p "$d"
	cp "$here/$model.pml" "$d/"
	cd "$d"
	# shellcheck disable=SC2086
	spin -a $flags "$model.pml" >spin.log 2>&1 || { echo "$name: spin -a failed:"; cat spin.log; exit 2; }
	# the quick configurations are small: compiling pan costs more than
	# optimising it saves
	opt=-O2
	[ "$quick" = quick ] && opt=-O0
	cc=("$opt" -w -DSAFETY "-DMEMLIM=$memlim")
	panflags=(-E -m100000)
	# queue.pml's rounds can follow one another without end: its
	# depth-first searches go deep
	[ "$model" = queue ] && panflags=(-E -m1000000)
	ltl=""
	case ${search:-} in "ltl "*) ltl=${search#ltl } ;; esac
	if [ -n "$ltl" ]; then
		cc=("$opt" -w "-DMEMLIM=$memlim")
		panflags+=(-a)
	elif [ "$expect" != pass ] && [ "${search:-bfs}" = bfs ]; then
		cc+=(-DBFS)
	elif [ "$expect" != pass ]; then
		cc+=(-DBITSTATE)
		panflags+=(-w32)
	fi
	gcc "${cc[@]}" -o pan pan.c 2>gcc.log || { echo "$name: gcc failed:"; cat gcc.log; exit 2; }
	t0=$(date +%s.%N)
	./pan "${panflags[@]}" >pan.out 2>&1 || true
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
	states=$(awk '/states, stored/ { print $1; exit }' pan.out)
	matched=$(awk '/states, matched/ { print $1; exit }' pan.out)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -1)
	mb=$(awk '/total actual memory usage/ { printf "%.0f", $1; exit }' pan.out)
	# a search cut short: memory (MEMLIM), or depth (-m), which pan only
	# warns about
	incomplete=$(grep -c -e "Search not completed" -e "max search depth too small" -e "reached -DMEMLIM bound" pan.out || true)
	result=""
	if [ -f "$model.pml.trail" ]; then
		# shellcheck disable=SC2086
		spin -t -p $flags "$model.pml" >trail.txt 2>&1 || true
		got=$(sed -n 's/^ *EV violate \([a-z-]*\).*/\1/p' trail.txt | head -1)
		if [ -n "$ltl" ] && grep -q "acceptance cycle" pan.out; then
			got=$ltl
		fi
		result="violate $got"
		if [ "$update" = 1 ]; then
			dst="$root/faultinject/sim/testdata/model/$name.trail"
			mkdir -p "$(dirname "$dst")"
			{
				echo "# model/check.sh $name: spin -t -p $flags $model.pml"
				grep -E '^ *EV |START OF CYCLE' trail.txt | sed 's/^ *//; s/^<<<<<START OF CYCLE>>>>>$/EV cycle/'
			} >"$dst"
		fi
	elif [ "${errors:-x}" = 0 ] && [ "$incomplete" = 0 ]; then
		result=pass
	elif [ "$incomplete" != 0 ]; then
		result="incomplete (memory or depth)"
	else
		result="errors=${errors:-?}"
	fi
	total_states=$((total_states + ${states:-0}))
	mark=""
	if [ "$result" != "$expect" ]; then
		mark="  <-- want: $expect"
		fails=$((fails + 1))
	fi
	row "$name" "$model" "$result" "${states:-?}" "${matched:-?}" "${depth:-?}" "${mb:-?}" "$secs" "$flags$mark"
	cd "$here"
done
end_all=$(date +%s)
if [ "$fails" -eq 0 ] && [ "$keep" = 0 ]; then
	rm -rf "$out"
	echo "$ran configurations, $total_states states in all, $((end_all - start_all)) s"
else
	echo "$ran configurations, $total_states states in all, $((end_all - start_all)) s; output in $out"
fi
if [ "$fails" -gt 0 ]; then
	echo "model/check.sh: $fails configuration(s) did not give what they must" >&2
	exit 1
fi
